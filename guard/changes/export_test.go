package changes

// TakeLimited is Take with a walk limit small enough for a test.
var TakeLimited = take
