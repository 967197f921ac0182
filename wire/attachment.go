package wire

import (
	"encoding/base64"
	"net/http"
	"slices"
)

// Attachment is an image sent with a message (extension): the phone's
// camera or a screenshot, base64 in the frame (so within the frame limit).
type Attachment struct {
	// Type is "image".
	Type string `json:"type"`
	// MediaType is one of ImageTypes.
	MediaType string `json:"media_type"`
	// Data is the image's bytes, standard base64.
	Data string `json:"data"`
	// Name is the file's name on the phone, shown only.
	Name string `json:"name,omitempty"`
}

// ImageTypes are the media types an image attachment may have: those the
// Anthropic API takes as image content blocks.
var ImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// MaxAttachments is the most images one message may carry.
const MaxAttachments = 4

// ValidateAttachments checks a message's attachments: at most
// MaxAttachments images, each of a known type, whose base64 decodes to an
// image of that type (by its first bytes, not its claim). It returns the
// first problem as INVALID_MESSAGE.
func ValidateAttachments(atts []Attachment) error {
	if len(atts) > MaxAttachments {
		return Errorf(CodeInvalidMessage, "a message may carry at most %d attachments, not %d", MaxAttachments, len(atts))
	}
	for i, a := range atts {
		if a.Type != "image" {
			return Errorf(CodeInvalidMessage, "attachment %d: type must be \"image\"", i+1)
		}
		if !slices.Contains(ImageTypes, a.MediaType) {
			return Errorf(CodeInvalidMessage, "attachment %d: media_type must be one of image/jpeg, image/png, image/gif, image/webp", i+1)
		}
		b, err := base64.StdEncoding.DecodeString(a.Data)
		if err != nil || len(b) == 0 {
			return Errorf(CodeInvalidMessage, "attachment %d: data must be the image in standard base64", i+1)
		}
		if got := http.DetectContentType(b); got != a.MediaType {
			return Errorf(CodeInvalidMessage, "attachment %d: the data is not an %s image", i+1, a.MediaType)
		}
	}
	return nil
}
