package httpapi

// AnswerSpec is how one kind is answered.
type AnswerSpec = answerSpec

// AnswerTable is the kind → answer table, for TestEveryJSONAnswer to walk.
func AnswerTable() map[string]AnswerSpec {
	t := make(map[string]AnswerSpec, len(answers))
	for k, s := range answers {
		t[string(k)] = s
	}
	return t
}
