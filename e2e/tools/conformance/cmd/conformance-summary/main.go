// Command conformance-summary prints, from the ginkgo JSON report of an
// e2e.test run, each spec the run selected with its outcome, the totals and
// the suite's run time (`make conformance`, e2e/cmd/cluster/conformance.go).
//
// A ginkgo report lists every spec of the suite, thousands of them, and
// those the focus left out are "skipped" just like a spec that skipped
// itself. So the specs are picked by the same focus regexp the run was
// given, matched against the same text ginkgo matches it against, and a
// spec that ran and skipped itself is shown as skipped, never as passed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func main() {
	focus := flag.String("focus", "", "the --ginkgo.focus regexp of the run")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: conformance-summary -focus REGEXP report.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *focus == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, flag.Arg(0), *focus); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-summary:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, path, focus string) error {
	re, err := regexp.Compile(focus)
	if err != nil {
		return fmt.Errorf("focus: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(reports) == 0 {
		return fmt.Errorf("%s holds no suite report", path)
	}
	if reports[0].SuiteConfig.DryRun {
		// A dry run reports every selected spec as passed.
		return fmt.Errorf("%s is the report of a dry run: no spec ran", path)
	}
	s := summarize(reports[0], re)
	if len(s.specs) == 0 {
		return fmt.Errorf("no spec in %s matches %q", path, focus)
	}
	s.print(w)
	return nil
}

type summary struct {
	specs []types.SpecReport
	// suite holds the failed nodes that belong to no spec (BeforeSuite,
	// AfterSuite, ReportAfterSuite): a failure there fails the run, or
	// skips every spec, without showing on any spec.
	suite   []types.SpecReport
	counts  map[string]int
	runTime time.Duration
}

func summarize(r types.Report, focus *regexp.Regexp) summary {
	s := summary{counts: map[string]int{}, runTime: r.RunTime}
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType != types.NodeTypeIt {
			if sr.Failed() {
				s.suite = append(s.suite, sr)
			}
			continue
		}
		// ginkgo matches the focus against the containers' and the
		// leaf's texts joined by spaces (internal/focus.go); Kubernetes
		// puts its [Serial], [Conformance] tags in those texts.
		if !focus.MatchString(sr.FullText()) {
			continue
		}
		s.specs = append(s.specs, sr)
		s.counts[outcome(sr.State)]++
	}
	return s
}

// outcome folds ginkgo's states into the three that matter here; every
// failure state (failed, panicked, interrupted, timed out, aborted) is a
// failure.
func outcome(st types.SpecState) string {
	switch {
	case st == types.SpecStatePassed:
		return "passed"
	case st.Is(types.SpecStateFailureStates):
		return "failed"
	default:
		return "skipped"
	}
}

func (s summary) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tTIME\tSPEC")
	for _, sr := range s.specs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", outcome(sr.State), sr.RunTime.Round(time.Second), sr.FullText())
	}
	tw.Flush()
	for _, sr := range s.specs {
		if o := outcome(sr.State); o != "passed" {
			fmt.Fprintf(w, "\n%s (%s): %s\n", o, sr.State, sr.FullText())
			fmt.Fprintf(w, "  at %s\n  %s\n", sr.Failure.Location, indent(firstLines(sr.Failure.Message, 6)))
		}
	}
	for _, sr := range s.suite {
		fmt.Fprintf(w, "\nsuite node %s %s (%s) at %s\n  %s\n", sr.LeafNodeType, sr.LeafNodeText, sr.State,
			sr.Failure.Location, indent(firstLines(sr.Failure.Message, 6)))
	}
	fmt.Fprintf(w, "\n%d of %d specs passed, %d failed, %d skipped; e2e.test ran %s\n",
		s.counts["passed"], len(s.specs), s.counts["failed"], s.counts["skipped"], s.runTime.Round(time.Second))
}

func firstLines(msg string, n int) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines in the report)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }
