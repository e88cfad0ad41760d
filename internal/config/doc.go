// Package config holds the pieces every configuration file of the project is read with, so
// that the sink's entry, the example binaries' files and the mirror's file agree on them:
//
//   - [Secret], a credential that every way of printing (fmt verbs, JSON, YAML) shows only
//     as set or unset, so a whole configuration can be logged;
//   - [Duration], a time.Duration written as Go duration text ("30s", "24h") in YAML;
//   - [Parse] and [Decode]: YAML read with ${NAME} references expanded ([yamlenv]), unknown
//     keys refused, and decoding errors scrubbed of the values they would quote
//     ([ScrubYAMLError]): after expansion such a value may be a secret.
//
// Errors name lines, keys and variables, never values.
package config
