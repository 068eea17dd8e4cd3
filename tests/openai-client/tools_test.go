package openaiclient

import (
	"testing"
	"time"
)

// TestOpenAINodeSDKTools runs tools.mjs (tool calls and structured
// outputs through the official SDK) against the real binary.
func TestOpenAINodeSDKTools(t *testing.T) {
	serveAndRun(t, "tools.mjs", "1024", 3*time.Minute)
}
