package wire

import (
	"reflect"
	"testing"
)

// TestAppendJSONHasEveryField fills every field of each Appender (through
// pointers and slices) with a value that is not its zero, so that a field
// added to a struct and not to its AppendJSON fails here even when it is
// omitempty and TestAppendJSON does not set it.
func TestAppendJSONHasEveryField(t *testing.T) {
	t.Parallel()
	for _, p := range []Appender{&FileReadResponse{}, &FileListResponse{}} {
		v := reflect.ValueOf(p).Elem()
		fillAll(t, v)
		checkAppender(t, Envelope{Type: "t"}, v.Interface().(Appender))
	}
}

func fillAll(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(t, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(t, v.Field(i))
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range s.Len() {
			fillAll(t, s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		v.SetString("x<&>")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(-7)
	default:
		t.Fatalf("a field of kind %s: teach fillAll to fill it", v.Kind())
	}
}
