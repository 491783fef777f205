package sqlpods

// Question is a sorted, filtered list: Query is kubeindex's list
// parameters for it (without limit and offset), where and orderBy the
// same question in SQL over pods_fields (alias f).
type Question struct {
	Name, Query    string
	where, orderBy string
	args           []any
}

// CountQuestion is a count grouped by two keys: Query is kubeindex's
// counts parameters, cols the same two keys as pods_fields columns.
type CountQuestion struct {
	Name, Query string
	cols        [2]string
}

// Questions are the pages make bench asks both: a filter on a path sorted
// by a Table column, and a filter and sort on Table columns. Ties are
// broken by namespace and name, as kubeindex breaks them.
var Questions = []Question{
	{Name: "running by restarts", Query: "filter=status.phase%3DRunning&sort=-restarts",
		where: "f.phase = ?", args: []any{"Running"}, orderBy: "f.restarts DESC, f.namespace, f.name"},
	{Name: "running by node (columns)", Query: "filter=status%3DRunning&sort=node",
		where: "f.status = ?", args: []any{"Running"}, orderBy: "f.node NULLS LAST, f.namespace, f.name"},
}

// Counts is the grouped count make bench asks both: pods per phase and
// node.
var Counts = CountQuestion{Name: "phase x node", Query: "groupBy=status.phase,spec.nodeName", cols: [2]string{"phase", "node"}}

// QuestionByName finds a question of Questions.
func QuestionByName(name string) (Question, bool) {
	for _, q := range Questions {
		if q.Name == name {
			return q, true
		}
	}
	return Question{}, false
}
