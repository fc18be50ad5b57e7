package installation

import _ "embed"

// OpenAPI describes the REST routes of Handler (under /v1/installation)
// as an OpenAPI 2.0 fragment: paths, definitions and the tag. The
// gateway's API merges it into /v1/openapi.json (api.Config.ExtraOpenAPI).
// The routes are served by Handler, not by grpc-gateway: their bodies are
// YAML or JSON descriptions and raw content files, which gRPC's
// InstallationService carries differently.
//
//go:embed openapi.json
var OpenAPI []byte
