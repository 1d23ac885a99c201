package changes

import (
	"bytes"
	"time"
)

// ReadIndexNames is ReadIndex with a bound on the bytes of all names small
// enough for a test.
var ReadIndexNames = readIndex

// TakeGitLimited is TakeGit with a search limit small enough for a test.
var TakeGitLimited = takeGit

// SetMaxLoose sets how many loose objects a snapshot records, until the
// returned function restores it.
func SetMaxLoose(n int) (restore func()) {
	was := maxLoose
	maxLoose = n
	return func() { maxLoose = was }
}

// SetRacyWindow sets how close to a snapshot an object's change time
// makes it hashed whatever its identity, until the returned function
// restores it.
func SetRacyWindow(d time.Duration) (restore func()) {
	was := racyWindow
	racyWindow = d
	return func() { racyWindow = was }
}

// ObjectID is objectID, for the fuzz test.
func ObjectID(data []byte, hashSize int, budget int64) (id, why string, done bool) {
	return objectID(bytes.NewReader(data), hashSize, &budget)
}
