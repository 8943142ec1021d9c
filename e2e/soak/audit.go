package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// The API server's audit log, read at the end: what the watches may have
// missed (a delete made and undone between two events while kube-apiserver
// was restarting) and who made each request, which no watch says.

// Namespaces of the soak: the sets and their pods, and the ordinary pods
// of the traffic.
const (
	SetNamespace   = "soak"
	PlainNamespace = "soak-plain"
)

// UserAgent is the soak's own client's, so the audit log tells its
// requests apart from the controllers'.
const UserAgent = "everynode-soak"

// AuditPolicy is kube-apiserver's audit policy for the soak: deletes of
// sets with their DeleteOptions (Request level: cascade or orphan),
// creates and deletes of pods, sets and revisions in the soak's
// namespaces, and everynode's writes (user), all at Metadata level
// otherwise; nothing else, so that an hour at 500 nodes stays a few
// hundred MB. kube-apiserver rotates the log at 100 MB (ReadAuditDir
// reads the rotated files too).
func AuditPolicy(everynodeUser string) string {
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  verbs: [delete, deletecollection]
  resources: [{group: apps, resources: [daemonsets]}, {group: everynode.io, resources: [daemonsets]}]
  namespaces: [%[1]s]
- level: Metadata
  verbs: [create, delete, deletecollection]
  resources:
  - {group: "", resources: [pods]}
  - {group: apps, resources: [daemonsets, controllerrevisions]}
  - {group: everynode.io, resources: [daemonsets]}
  namespaces: [%[1]s, %[2]s]
- level: Metadata
  users: [%[3]q]
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`, SetNamespace, PlainNamespace, everynodeUser)
}

// AuditEvent is the part of an audit.k8s.io/v1 Event the soak reads.
type AuditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	RequestObject *struct {
		PropagationPolicy string `json:"propagationPolicy"`
		OrphanDependents  *bool  `json:"orphanDependents"`
	} `json:"requestObject"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

func (e *AuditEvent) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

func (e *AuditEvent) resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Resource
}

func (e *AuditEvent) name() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Name
}

func (e *AuditEvent) namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

func (e *AuditEvent) dryRun() bool { return strings.Contains(e.RequestURI, "dryRun") }

// orphans reports whether a delete leaves the dependents.
func (e *AuditEvent) orphans() bool {
	r := e.RequestObject
	return r != nil && (r.PropagationPolicy == "Orphan" || (r.OrphanDependents != nil && *r.OrphanDependents))
}

// ParseAudit reads the completed events of one audit log, skipping lines
// that are no event (a log read while it is written may end mid-line).
func ParseAudit(r io.Reader, fn func(*AuditEvent)) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var e AuditEvent
			if json.Unmarshal(line, &e) == nil && e.Stage == "ResponseComplete" {
				fn(&e)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// AuditFiles are the audit log and the files kube-apiserver rotated it
// into (audit-<time>.log, beside it), oldest first.
func AuditFiles(log string) []string {
	dir, base := filepath.Dir(log), filepath.Base(log)
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	rotated, _ := filepath.Glob(filepath.Join(dir, stem+"-*"+filepath.Ext(base)))
	sort.Strings(rotated) // the time in their names sorts
	return append(rotated, log)
}

// ReadAuditFiles reads the events of files, in order, received at or
// after since.
func ReadAuditFiles(files []string, since time.Time) ([]AuditEvent, error) {
	var out []AuditEvent
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return out, err
		}
		err = ParseAudit(fh, func(e *AuditEvent) {
			if !e.RequestReceived.Before(since) {
				out = append(out, *e)
			}
		})
		fh.Close()
		if err != nil {
			return out, fmt.Errorf("%s: %w", f, err)
		}
	}
	slices.SortStableFunc(out, func(a, b AuditEvent) int { return a.RequestReceived.Compare(b.RequestReceived) })
	return out, nil
}

// Who made a request, as the audit log tells them apart (kwokctl gives
// kube-controller-manager, kube-scheduler and kwok one admin identity;
// kube-controller-manager names each controller's client in its user
// agent).
type caller string

const (
	callerSoak      caller = "soak"
	callerEverynode caller = "everynode"
	callerGC        caller = "garbage-collector"
	callerPodGC     caller = "pod-garbage-collector"
	callerKwok      caller = "kwok"
	callerOther     caller = "other"
)

func callerOf(e *AuditEvent, everynodeUser string) caller {
	switch ua := e.UserAgent; {
	case strings.HasPrefix(ua, UserAgent):
		return callerSoak
	case e.User.Username == everynodeUser:
		return callerEverynode
	case strings.HasSuffix(ua, "/generic-garbage-collector"):
		return callerGC
	case strings.HasSuffix(ua, "/pod-garbage-collector"):
		return callerPodGC
	case strings.HasPrefix(ua, "kwok-controller/"):
		return callerKwok
	}
	return callerOther
}

// setOf is the catalog set an object of the soak's namespace belongs to,
// by its name: pods and revisions are named after their set.
func setOf(name string) string {
	for _, s := range Catalog() {
		if name == s.Name || strings.HasPrefix(name, s.Name+"-") {
			return s.Name
		}
	}
	return ""
}

// AuditSummary is what the audit log says about a run.
type AuditSummary struct {
	// Events is how many events of the run it holds.
	Events int
	// Deletes counts the deletes of pods, sets and revisions in the
	// soak's namespace by caller and resource ("everynode pods").
	Deletes map[string]int
	// PodCreates counts pod creates: daemon pods by everynode, ordinary
	// ones, dry runs, refused ones.
	PodCreates map[string]int
}

// CheckAudit asks the audit log of a run invariants 3 and 5:
//   - 3: no ordinary pod (namespace PlainNamespace, created or dry-run)
//     refused with everynode named in the answer;
//   - 5: no set deleted but by the soak; no revision deleted by anyone
//     but everynode (its history limit) and the garbage collector after
//     the soak deleted its set with cascade; no daemon pod deleted by the
//     garbage collector unless the soak deleted its set with cascade, nor
//     by anyone but everynode, the soak, the garbage collectors and kwok.
func CheckAudit(events []AuditEvent, everynodeUser string) ([]Violation, AuditSummary) {
	sum := AuditSummary{Events: len(events), Deletes: map[string]int{}, PodCreates: map[string]int{}}
	var vs []Violation
	// cascaded: the sets the soak has deleted with cascade so far.
	cascaded := map[string]bool{}
	for i := range events {
		e := &events[i]
		if e.ObjectRef == nil || e.ObjectRef.Subresource != "" {
			continue
		}
		who := callerOf(e, everynodeUser)
		ns, res, name := e.namespace(), e.resource(), e.name()
		switch {
		case e.Verb == "create" && res == "pods":
			switch {
			case ns == PlainNamespace && e.code() >= 400:
				sum.PodCreates["ordinary refused"]++
				if msg := e.ResponseStatus.Message; mentionsEverynode(msg) {
					vs = append(vs, Violation{At: e.RequestReceived, Invariant: InvAdmission,
						Message: fmt.Sprintf("an ordinary pod create (dry run %t) was refused %d naming everynode: %s", e.dryRun(), e.code(), msg),
						Objects: []string{"pod " + ns + "/" + name}})
				}
			case ns == PlainNamespace && e.dryRun():
				sum.PodCreates["ordinary dry runs"]++
			case ns == PlainNamespace:
				sum.PodCreates["ordinary"]++
			case who == callerEverynode && e.code() < 400:
				sum.PodCreates["daemon pods by everynode"]++
			case who == callerEverynode:
				sum.PodCreates["daemon pods by everynode, refused"]++
			}
		case (e.Verb == "delete" || e.Verb == "deletecollection") && ns == SetNamespace && e.code() < 300:
			sum.Deletes[string(who)+" "+res]++
			set := setOf(name)
			switch res {
			case "daemonsets":
				if who == callerSoak {
					cascaded[name] = !e.orphans()
					continue
				}
				vs = append(vs, Violation{At: e.RequestReceived, Invariant: InvLostSet, Set: name,
					Message: "the set was deleted by " + describeCaller(e), Objects: []string{e.ObjectRef.APIGroup + " daemonset " + name}})
			case "controllerrevisions":
				if who == callerEverynode || (who == callerGC && cascaded[set]) {
					continue
				}
				vs = append(vs, Violation{At: e.RequestReceived, Invariant: InvLostRev, Set: set,
					Message: "a revision was deleted by " + describeCaller(e) + cascadeNote(who, cascaded[set]), Objects: []string{"revision " + name}})
			case "pods":
				switch {
				case who == callerEverynode, who == callerSoak, who == callerKwok, who == callerPodGC:
					continue
				case who == callerGC && cascaded[set]:
					continue
				}
				vs = append(vs, Violation{At: e.RequestReceived, Invariant: InvLostPod, Set: set,
					Message: "a daemon pod was deleted by " + describeCaller(e) + cascadeNote(who, cascaded[set]), Objects: []string{"pod " + name}})
			}
		}
	}
	return vs, sum
}

func describeCaller(e *AuditEvent) string {
	return fmt.Sprintf("%s (user agent %q)", e.User.Username, e.UserAgent)
}

func cascadeNote(who caller, cascaded bool) string {
	if who == callerGC && !cascaded {
		return ", though the soak never deleted its set with cascade"
	}
	return ""
}

// mentionsEverynode reports whether an API error names one of everynode's
// webhooks, its extender or its service: a refusal everynode caused.
func mentionsEverynode(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "everynode")
}
