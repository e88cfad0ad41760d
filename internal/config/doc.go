// Package config holds the pieces every configuration file of the project is read with, so
// that the sink's entry, the example binaries' files and the mirror's file agree on them:
//
//   - [Secret], a credential that every way of printing (fmt verbs, JSON, YAML) shows only
//     as set or unset, so a whole configuration can be logged;
//   - [Duration], a time.Duration written as Go duration text ("30s", "24h") in YAML;
//   - [Parse] and [Decode]: YAML read with ${NAME} references expanded ([yamlenv]), unknown
//     keys refused, and decoding errors scrubbed of the values they would quote
//     ([ScrubYAMLError]): after expansion such a value may be a secret;
//   - the one format of every configuration error, [Problem]: one line of the file, the key's
//     path, and for an unknown key its section, the keys the section knows and a
//     did-you-mean ([Suggest]: case, '-' for '_', edit distance) --
//     `line 7: unknown key "publicaton" in source: did you mean "publication"? (known: ...)`;
//   - the walker behind it: [CheckKeys] checks a yaml.Node against the yaml tags of the Go type
//     it decodes into (structs, inline ones included, pointers, lists, string-keyed maps;
//     it stops at a yaml.Node, a type that unmarshals itself, an interface); [DecodeAt] and
//     [ExpandAt] decode and expand a node of a larger document, so that lines stay the file's
//     and values of the wrong type are named by their key paths; [Keys] lists every key path
//     a type accepts, for the tests that keep the configuration references (CONFIG.md) true.
//
// Errors name lines, keys and variables, never values.
package config
