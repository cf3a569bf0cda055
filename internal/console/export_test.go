package console

// Short is short, for the tests.
var Short = short
