// Package jsonenc holds the small JSON helpers the hand-written encoders and decoders share:
// AppendString, the string writer (searchstore's _bulk bodies, mongostore's BSON-to-JSON,
// luamerge's bridge, the sink's documents), Unquote, the string reader (luamerge's bridge,
// memstore's refusal checker), and the JSON Pointer token escape and unescape
// (AppendPointerToken: the paths in luamerge's, memstore's and mongostore's errors;
// UnescapePointerToken: luamerge's lookups and store's time pointers). They exist because
// encoding/json allocates per value and the hot paths append to reused buffers.
package jsonenc
