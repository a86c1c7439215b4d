//go:build !unix

package egress

// rawReads is false outside Unix: readSome reads through the connection,
// holding a buffer while it waits.
const rawReads = false

func rawRead(uintptr, []byte) (int, error) { panic("rawRead outside Unix") }
