package tracememory // import "github.com/svc/svc-collector/svcspanfilterprocessor/internal/tracememory"

// traceList is a shard's list of traces (idle, waiting or late), oldest activity first, linked
// through the traces themselves: a trace moves between lists on every hold and release, and an
// element allocated per move showed in the CPU profile of held spans.
type traceList struct{ head, tail *trace }

func (l *traceList) front() *trace { return l.head }

// pushBack appends t, which is on no list.
func (l *traceList) pushBack(t *trace) {
	t.list, t.prev, t.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = t
	} else {
		l.head = t
	}
	l.tail = t
}

// remove takes t out of l, the list it is on.
func (l *traceList) remove(t *trace) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		l.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		l.tail = t.prev
	}
	t.list, t.prev, t.next = nil, nil, nil
}
