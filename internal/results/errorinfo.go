package results

// ErrorMessage is an ErrorInfo's message for a failure whose code came as
// a name ("INVALID_ARGUMENT", a REST status) rather than a number: the name
// goes in front of the message so it is not lost, as ErrorInfo's code is a
// number. Either part may be empty. Webhook events and the Gemini API's
// answers both use it, so one failure reads the same whichever path
// settled the operation.
func ErrorMessage(codeName, msg string) string {
	switch {
	case codeName == "":
		return msg
	case msg == "":
		return codeName
	}
	return codeName + ": " + msg
}
