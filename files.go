package main

import "embed"

// files are what the server serves from the module's root, where Redocly's
// lint and the README's links find them: the two APIs' documents, the
// reference page (webui/) and the console (console/). go:embed reaches no
// parent folder, so the root embeds them and passes them to the wiring.
//
//go:embed openapi.yaml admin-openapi.yaml webui/index.html webui/docs.js webui/swagger-ui console
var files embed.FS
