// Package trust decides whether an image may run, as the operator and the
// owner's CLI both need it: it loads the trust policy (OpenFief's CI, the
// embedded catalog, the owner's signers; D-43, D-45) and checks images with a
// PolicyVerifier, which reads signatures through the registry adapter in
// trust/cosign and asks the domain (internal/plugins) for the decision (D-42,
// D-56, D-57). It holds no Kubernetes client; the Verification it returns is
// already shaped like the SignatureVerified condition.
package trust
