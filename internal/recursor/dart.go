package recursor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// dartDate is the pattern DateTime.parse (dart:core) accepts: ISO 8601 /
// RFC 3339 dates, optionally with a time and a zone.
var dartDate = regexp.MustCompile(`^([+-]?[0-9]{4,6})-?([0-9][0-9])-?([0-9][0-9])` +
	`(?:[ T]([0-9][0-9])(?::?([0-9][0-9])(?::?([0-9][0-9])(?:[.,]([0-9]+))?)?)?` +
	`( ?[zZ]| ?([-+])([0-9][0-9])(?::?([0-9][0-9]))?)?)?$`)

// DateTimeParses reports whether Dart's DateTime.parse accepts s.
func DateTimeParses(s string) bool { return dartDate.MatchString(s) }

// DartISO formats t as Dart's DateTime.toIso8601String does: milliseconds
// always, microseconds only when not zero, "Z" for a UTC time and no zone
// at all for a local one.
func DartISO(t time.Time, utc bool) string {
	if utc {
		t = t.UTC()
	}
	s := t.Format("2006-01-02T15:04:05") + fmt.Sprintf(".%03d", t.Nanosecond()/1e6)
	if us := t.Nanosecond() / 1e3 % 1000; us != 0 {
		s += fmt.Sprintf("%03d", us)
	}
	if utc {
		s += "Z"
	}
	return s
}

// isDartInt reports whether a JSON number decodes to a Dart int (so that
// `as int` holds): an integer literal, no fraction, no exponent, within 64
// bits.
func isDartInt(n json.Number) bool {
	if strings.ContainsAny(string(n), ".eE") {
		return false
	}
	_, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil
}

// kv is one member of an ordered JSON object.
type kv struct {
	Key   string
	Value any
}

// object is a JSON object whose members keep their order, as a Dart map
// literal does when jsonEncode writes it.
type object []kv

// MarshalJSON writes the members in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Key)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", m.Key, err)
		}
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", m.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
