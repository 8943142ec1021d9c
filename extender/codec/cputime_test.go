//go:build unix

package codec

import (
	"syscall"
	"testing"
)

// cpuTime is the CPU time the process has used (every thread, the
// garbage collector's included), in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU adds cpu-ns/op: on a shared machine, time spent waiting for a
// core inflates ns/op but not the CPU time the benchmark used.
func reportCPU(b *testing.B, start int64) {
	if end := cpuTime(); start >= 0 && end >= 0 && b.N > 0 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}
