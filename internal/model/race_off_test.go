//go:build !race

package model

// raceEnabled: this test binary runs under the race detector.
const raceEnabled = false
