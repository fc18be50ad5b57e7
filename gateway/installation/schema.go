package installation

import _ "embed"

// Schema is the JSON Schema (draft 2020-12) of a description, the same
// document as docs/installation.schema.json; the gateway serves it at
// GET /v1/installation/schema. Parse checks more than the schema can say
// (references between content, profiles, scenes and assignments).
//
//go:embed schema.json
var Schema []byte
