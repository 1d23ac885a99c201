package changes

// ReadIndexNames is ReadIndex with a bound on the bytes of all names small
// enough for a test.
var ReadIndexNames = readIndex

// TakeGitLimited is TakeGit with a search limit small enough for a test.
var TakeGitLimited = takeGit
