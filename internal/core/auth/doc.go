// Package auth verifies the openfief-core token a plugin presents to the
// core (D-27): a TokenReview for the audience openfief-core, cached like the
// egress proxy's (the proxy's own CachingTokenReviewer, reused), and a
// mapping of the authenticated ServiceAccount to exactly one plugin
// instance. A token of another instance, another audience, an expired token,
// a token of a deleted ServiceAccount, and the token of an instance the core
// no longer serves are all refused. No token ever reaches a log or an error.
package auth
