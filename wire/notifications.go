package wire

// Notification message types.
const (
	TypeNotification    = "notification"
	TypeNotificationAck = "notification_ack"
)

// Notification is the payload of "notification".
type Notification struct {
	NotificationID   string         `json:"notification_id"`
	SessionID        string         `json:"session_id"`
	NotificationType string         `json:"notification_type"`
	Title            string         `json:"title"`
	Body             string         `json:"body"`
	Priority         string         `json:"priority"`
	Data             map[string]any `json:"data"`
}

// NotificationAck is the payload of "notification_ack".
type NotificationAck struct {
	NotificationIDs []string `json:"notification_ids"`
}

// Web Push message types (extension): the web client asks for the
// daemon's VAPID public key, subscribes through its browser's push
// service, and hands the subscription over.
const (
	TypePushConfig          = "push_config"
	TypePushConfigResponse  = "push_config_response"
	TypePushSubscribe       = "push_subscribe"
	TypePushSubscribeResp   = "push_subscribe_response"
	TypePushUnsubscribe     = "push_unsubscribe"
	TypePushUnsubscribeResp = "push_unsubscribe_response"
)

// PushConfig is the payload of push_config_response.
type PushConfig struct {
	// Enabled is false when the daemon sends no Web Push.
	Enabled bool `json:"enabled"`
	// VAPIDPublicKey is the applicationServerKey to subscribe with,
	// base64url.
	VAPIDPublicKey string `json:"vapid_public_key,omitempty"`
}

// PushSubscription is the payload of push_subscribe and push_unsubscribe:
// the browser's PushSubscription.toJSON().
type PushSubscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// PushMessage is what the web client's service worker (web/static/sw.js)
// receives through its browser's push service (extension).
type PushMessage struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
	Tag   string `json:"tag"`
	URL   string `json:"url,omitempty"`
	// Close asks the worker to close the notification tagged Tag and to
	// show Title and Body quietly instead, under one tag for every such
	// notice: a push must show something.
	Close bool `json:"close,omitempty"`
}

// PushSubscribed is the payload of push_subscribe_response and
// push_unsubscribe_response.
type PushSubscribed struct {
	Subscribed bool `json:"subscribed"`
}
