// Package soak is the soak of issue 59: everynode on the harness's local
// cluster (package everynode.io/e2e/cluster) for DURATION under a seeded
// random schedule of traffic and overlapping faults, with invariants
// checked continuously from watches and once more at the end from the
// API server's audit log.
//
// The parts that decide are pure and unit-tested, the rest carries them
// out:
//   - schedule.go: the schedule, a pure function of the seed and the
//     duration (Generate), so `make soak SEED=n DURATION=d` replays one;
//   - catalog.go: the 20 sets, both kinds (everynode.io/v1alpha1 and
//     apps/v1 under --takeover) and every update strategy;
//   - observe.go, invariants.go: what the watches record, and the
//     checkers over those records (duplicates, the unavailability budget,
//     losses, convergence);
//   - audit.go: the same questions asked of the audit log;
//   - samples.go, plot.go, report.go: the controller's RSS and goroutines
//     over the run with their slopes, the SVG plot and the markdown report;
//   - run.go, traffic.go, faults.go, watch.go: the cluster side, run by
//     `make soak` and `make soak-smoke` through e2e/cmd/cluster.
package soak
