//go:build !race

package testkit

// RaceDetector: this test binary runs under the race detector.
const RaceDetector = false
