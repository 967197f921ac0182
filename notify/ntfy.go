package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Ntfy publishes to an ntfy topic (https://ntfy.sh/TOPIC or a self-hosted
// server). It publishes as JSON to the server's root, so that titles in
// any script arrive intact (header values would need RFC 2047).
type Ntfy struct {
	// URL is the topic's URL.
	URL string
	// Token is sent as a bearer token when set (an access token).
	Token  string
	Client *http.Client
}

// Name is the topic's URL.
func (n *Ntfy) Name() string { return "ntfy " + n.URL }

// ntfyMessage is ntfy's JSON publishing format.
type ntfyMessage struct {
	Topic    string   `json:"topic"`
	Message  string   `json:"message"`
	Title    string   `json:"title,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	Priority int      `json:"priority,omitempty"`
	Click    string   `json:"click,omitempty"`
}

// ParseNtfy checks a topic URL: http(s), a host, and a topic as its last
// path element.
func ParseNtfy(raw string) (*Ntfy, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("%q is not an ntfy topic URL (https://ntfy.sh/TOPIC)", raw)
	}
	return &Ntfy{URL: strings.TrimSuffix(raw, "/")}, nil
}

// Send publishes m.
func (n *Ntfy) Send(ctx context.Context, m Message) error {
	if m.Withdraw {
		return nil // ntfy cannot take a message back
	}
	u, err := url.Parse(n.URL)
	if err != nil {
		return err
	}
	dir, topic := path.Split(strings.TrimSuffix(u.Path, "/"))
	u.Path = dir
	body, err := json.Marshal(ntfyMessage{Topic: topic, Message: m.Body, Title: m.Title, Tags: []string{ntfyTag(m.Kind)},
		Priority: ntfyPriority(m.Priority), Click: m.URL})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	client := n.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("ntfy answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// ntfyPriority maps a notification's priority to ntfy's 1 (min) to 5 (max).
func ntfyPriority(p string) int {
	switch p {
	case "high":
		return 4
	case "low":
		return 2
	default:
		return 3
	}
}

func ntfyTag(kind string) string {
	switch kind {
	case "approval_required":
		return "question"
	case "error":
		return "warning"
	default:
		return "robot"
	}
}
