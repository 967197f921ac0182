package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
)

// pngData is a real 2×2 PNG, base64.
func pngData(t testing.TB) string {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestValidateAttachments(t *testing.T) {
	t.Parallel()
	ok := Attachment{Type: "image", MediaType: "image/png", Data: pngData(t)}
	jpegHead := base64.StdEncoding.EncodeToString([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"))
	tests := []struct {
		name string
		atts []Attachment
		want string // substring of the error; "" = valid
	}{
		{"none", nil, ""},
		{"one png", []Attachment{ok}, ""},
		{"a jpeg", []Attachment{{Type: "image", MediaType: "image/jpeg", Data: jpegHead}}, ""},
		{"four", []Attachment{ok, ok, ok, ok}, ""},
		{"five", []Attachment{ok, ok, ok, ok, ok}, "at most 4"},
		{"not an image type", []Attachment{{Type: "file", MediaType: "image/png", Data: ok.Data}}, `"image"`},
		{"svg", []Attachment{{Type: "image", MediaType: "image/svg+xml", Data: base64.StdEncoding.EncodeToString([]byte("<svg/>"))}}, "media_type"},
		{"not base64", []Attachment{{Type: "image", MediaType: "image/png", Data: "%%%"}}, "base64"},
		{"url-safe base64", []Attachment{{Type: "image", MediaType: "image/png", Data: strings.NewReplacer("+", "-", "/", "_").Replace(ok.Data) + "-_"}}, "base64"},
		{"empty", []Attachment{{Type: "image", MediaType: "image/png", Data: ""}}, "base64"},
		{"claims png, is jpeg", []Attachment{{Type: "image", MediaType: "image/png", Data: jpegHead}}, "not an image/png"},
		{"claims png, is text", []Attachment{{Type: "image", MediaType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\nrm -rf /"))}}, "not an image/png"},
	}
	for _, tt := range tests {
		err := ValidateAttachments(tt.atts)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		var we *Error
		if !errors.As(err, &we) || we.Code != CodeInvalidMessage || !strings.Contains(we.Message, tt.want) {
			t.Errorf("%s: %v, want INVALID_MESSAGE containing %q", tt.name, err, tt.want)
		}
	}
}

// FuzzMessagePayload decodes arbitrary message payloads as the bridge
// does, attachments included: an error is always INVALID_MESSAGE, never a
// panic.
func FuzzMessagePayload(f *testing.F) {
	f.Add(`{"session_id":"s","content":"hi"}`)
	f.Add(`{"session_id":"s","content":"","attachments":[{"type":"image","media_type":"image/png","data":"` + pngData(f) + `"}]}`)
	f.Add(`{"session_id":"s","attachments":[{"type":"image","media_type":"image/gif","data":"R0lGODlh"}]}`)
	f.Add(`{"attachments":{}}`)
	f.Fuzz(func(t *testing.T, payload string) {
		env := Envelope{Type: TypeMessage, Payload: json.RawMessage(payload)}
		var m Message
		err := DecodePayload(env, &m)
		if err == nil {
			err = ValidateAttachments(m.Attachments)
		}
		var we *Error
		if err != nil && (!errors.As(err, &we) || we.Code != CodeInvalidMessage) {
			t.Fatalf("%q: %v", payload, err)
		}
	})
}
