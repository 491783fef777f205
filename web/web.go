// Package web holds kubeindex's dashboard: plain HTML, CSS and JavaScript
// modules with no build step, embedded in the binary so that it works
// offline and needs no CDN. The server serves index.html at / and the files
// of ui/ at /ui/{file}; see server/web.go.
package web

import "embed"

// Files holds index.html and ui/*. It is read-only and safe for concurrent
// use.
//
//go:embed index.html ui
var Files embed.FS
