// Package codec reads kube-scheduler's ExtenderArgs and writes
// ExtenderFilterResult for the extender, by hand rather than with
// reflection-based encoding/json.
//
// Why: kube-scheduler sends every pod it places with every candidate node
// name, and encoding/json's reflection and its allocation per name made
// that call's cost grow with the cluster (BenchmarkDecodeArgs compares the
// two). ReadArgs reads ExtenderArgs in one pass over a single string copy
// of the body, hands out node names as substrings of it (one allocation
// for all of them, in a pooled slice), and decodes the pod's metadata only
// when it may be a daemon pod: an ordinary pod's fields, and a daemon
// pod's spec and status, are never read, so they are checked for JSON
// syntax only. Args.EncodeFilterResult writes the answer the same way, and
// an answer that keeps every node sends the request's names back as the
// text they came in.
//
// ReadArgs lends the Args to a function instead of returning them, so
// that the codec, not its caller, knows when the names' slice may go back
// to its pool.
//
// Anything unusual (escapes, non-ASCII, duplicate keys) goes to
// encoding/json, so the result is what encoding/json would give; the
// differential fuzz tests (FuzzDecodeArgs, FuzzEncodeFilterResult) hold the
// codec to that.
package codec
