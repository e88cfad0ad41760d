// Package jsonenc holds the small JSON-writing helpers the hand-written encoders share
// (searchstore's _bulk bodies, mongostore's BSON-to-JSON, luamerge's bridge, the sink's
// documents). They exist because encoding/json allocates per value and the hot paths append to
// reused buffers.
package jsonenc
