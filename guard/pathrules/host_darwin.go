package pathrules

// Host is the flavour of the system this binary runs on.
const Host = Darwin
