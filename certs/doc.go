// Package certs supplies the serving certificate of everynode's one HTTPS
// server. A Source hands certificates to crypto/tls and says whether it has a
// valid one (for /readyz). Two sources exist:
//
//   - FileSource reads a certificate and key from files and picks up new
//     contents on the next TLS handshake, which is what a mounted Secret
//     (cert-manager, or a user's own) needs: the kubelet swaps the files by
//     replacing a symlink, without restarting the pod.
//   - SelfSigned keeps CAs in a Secret and signs its own serving certificate
//     with the current one (cert-manager's DynamicSource, the machinery
//     cert-manager's own webhook uses, over this package's Authority, which
//     publishes the next CA a rotation ahead), and CABundleInjector writes
//     the bundle of CAs into the webhook configurations so the API server
//     trusts it.
package certs
