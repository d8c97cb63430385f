package tracememory

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/svc/svc-collector/pkg/svcattr"
)

func TestSetParent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parent   pcommon.SpanID
		existing string // a value of the original-parent attribute the span already has
		want     string // the attribute afterwards; empty: absent
	}{
		{name: "parent recorded", parent: pcommon.SpanID{0xab, 7: 0x01}, want: "ab00000000000001"},
		{name: "an earlier gateway's original parent wins", parent: pcommon.SpanID{0xab, 7: 0x01}, existing: "cd00000000000002", want: "cd00000000000002"},
		{name: "a root records nothing", want: ""},
		{name: "a root keeps what it has", existing: "cd00000000000002", want: "cd00000000000002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetParentSpanID(tc.parent)
			span.Attributes().PutStr("gen_ai.system", "openai")
			if tc.existing != "" {
				span.Attributes().PutStr(svcattr.OriginalParentSpanID, tc.existing)
			}
			newParent := pcommon.SpanID{0xef, 7: 0x03}
			new(released).reparent(span, newParent, ReparentDroppedParent)
			assert.Equal(t, newParent, span.ParentSpanID())
			v, ok := span.Attributes().Get(svcattr.OriginalParentSpanID)
			if tc.want == "" {
				assert.False(t, ok)
				assert.Equal(t, 1, span.Attributes().Len())
				return
			}
			require.True(t, ok)
			assert.Equal(t, pcommon.ValueTypeStr, v.Type())
			assert.Equal(t, tc.want, v.Str())
			assert.Equal(t, 2, span.Attributes().Len(), "one attribute added at most")
			// The first original parent stays when the span is moved again.
			new(released).reparent(span, pcommon.SpanID{}, ReparentNoKeptAncestor)
			v, _ = span.Attributes().Get(svcattr.OriginalParentSpanID)
			assert.Equal(t, tc.want, v.Str())
		})
	}
}

// TestWaitingIndex: the index of held items by the span they wait on, with its indexed flags:
// removal from any place of a list, and takeWaiting, after which removal is a no-op.
func TestWaitingIndex(t *testing.T) {
	a, b := idOf("a"), idOf("b")
	for _, tc := range []struct {
		name string
		// ops on items 0..3 (0-2 wait on a, 3 on b; added in order, so the list of a is 2, 1, 0)
		run       func(tr *trace, its []*item)
		wantOnA   []int // the items the list of a has afterwards, in order
		wantOnB   []int
		wantTaken []int // what takeWaiting(a) returned, when run takes it
	}{
		{name: "as added", run: func(*trace, []*item) {}, wantOnA: []int{2, 1, 0}, wantOnB: []int{3}},
		{name: "remove first", run: func(tr *trace, its []*item) { tr.removeWaiting(its[2]) }, wantOnA: []int{1, 0}, wantOnB: []int{3}},
		{name: "remove middle", run: func(tr *trace, its []*item) { tr.removeWaiting(its[1]) }, wantOnA: []int{2, 0}, wantOnB: []int{3}},
		{name: "remove last", run: func(tr *trace, its []*item) { tr.removeWaiting(its[0]) }, wantOnA: []int{2, 1}, wantOnB: []int{3}},
		{name: "remove twice", run: func(tr *trace, its []*item) {
			tr.removeWaiting(its[1])
			tr.removeWaiting(its[1])
		}, wantOnA: []int{2, 0}, wantOnB: []int{3}},
		{name: "remove the only one", run: func(tr *trace, its []*item) { tr.removeWaiting(its[3]) }, wantOnA: []int{2, 1, 0}},
		{name: "take", run: func(tr *trace, its []*item) {
			tr.removeWaiting(its[1])
		}, wantOnA: []int{2, 0}, wantOnB: []int{3}, wantTaken: []int{2, 0}},
		{name: "take all", run: func(tr *trace, its []*item) {
			tr.removeWaiting(its[3])
		}, wantOnA: []int{2, 1, 0}, wantTaken: []int{2, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &trace{}
			its := make([]*item, 4)
			for i := range its {
				its[i] = &item{}
				on := a
				if i == 3 {
					on = b
				}
				tr.addWaiting(its[i], on)
			}
			tc.run(tr, its)
			listOf := func(first *item) []int {
				var got []int
				for it := first; it != nil; it = it.waitNext {
					for i := range its {
						if its[i] == it {
							got = append(got, i)
						}
					}
				}
				return got
			}
			checkIndex := func(on pcommon.SpanID, want []int) {
				t.Helper()
				first := tr.waitingOn[on]
				assert.Equal(t, want, listOf(first))
				if first != nil {
					assert.Nil(t, first.waitPrev)
				}
				for it := first; it != nil; it = it.waitNext {
					assert.True(t, it.indexed)
					assert.Equal(t, on, it.waitOn)
					if it.waitNext != nil {
						assert.Same(t, it, it.waitNext.waitPrev)
					}
				}
			}
			checkIndex(a, tc.wantOnA)
			checkIndex(b, tc.wantOnB)
			if tc.wantTaken == nil {
				return
			}
			first := tr.takeWaiting(a)
			assert.Equal(t, tc.wantTaken, listOf(first))
			assert.NotContains(t, waitingLists(tr), a)
			if tc.wantOnB == nil {
				assert.Empty(t, waitingLists(tr))
				assert.Nil(t, tr.waitingOn, "an empty index is dropped")
			}
			for it := first; it != nil; it = it.waitNext {
				assert.False(t, it.indexed)
			}
			// Taken items are out of the index: removing one changes nothing there.
			tr.removeWaiting(first)
			checkIndex(b, tc.wantOnB)
			assert.Nil(t, tr.takeWaiting(a))
		})
	}
}

// waitingLists is the waiting index of tr as one map: the first item of each list by the span it
// waits on.
func waitingLists(tr *trace) map[pcommon.SpanID]*item {
	lists := map[pcommon.SpanID]*item{}
	for on, first := range tr.waitingOn {
		lists[on] = first
	}
	return lists
}

// TestWaitingIndexManySpans: lists of many spans, taken out and put back in any order, keep each
// item in the list of its own span only.
func TestWaitingIndexManySpans(t *testing.T) {
	tr := &trace{}
	const spans, per = 5, 3
	on := func(s int) pcommon.SpanID { return idOf(fmt.Sprint("parent ", s)) }
	items := map[pcommon.SpanID][]*item{}
	for round := range 2 {
		for s := range spans {
			for range per {
				it := &item{}
				tr.addWaiting(it, on(s))
				items[on(s)] = append(items[on(s)], it)
			}
		}
		// Take the lists out in an order that empties the place beside the map first.
		for _, s := range []int{0, 3, 1} {
			first := tr.takeWaiting(on(s))
			n := 0
			for it := first; it != nil; it = it.waitNext {
				assert.Equal(t, on(s), it.waitOn)
				n++
			}
			assert.Equal(t, len(items[on(s)]), n, "round %d span %d", round, s)
			delete(items, on(s))
		}
		lists := waitingLists(tr)
		assert.Len(t, lists, 2)
		for _, s := range []int{2, 4} {
			n := 0
			for it := lists[on(s)]; it != nil; it = it.waitNext {
				assert.Equal(t, on(s), it.waitOn)
				n++
			}
			assert.Equal(t, len(items[on(s)]), n)
		}
		// Emptied one by one: the index is then empty.
		if round == 1 {
			for _, s := range []int{2, 4} {
				for _, it := range items[on(s)] {
					tr.removeWaiting(it)
				}
			}
			assert.Empty(t, waitingLists(tr))
			assert.Nil(t, tr.waitingOn)
		}
	}
}

// TestAdmitRemovesWhatDoesNotGoOn: the batch keeps exactly its kept spans that are not held, under
// their own resource and scope, and Kept and Pass say so (also when nothing goes on, which takes
// the short way).
func TestAdmitRemovesWhatDoesNotGoOn(t *testing.T) {
	// Two resources of two scopes each; "k" spans are kept, "d" dropped; "agent" is never sent, so
	// the kept spans below it are held.
	type in struct{ name, parent string }
	batch := [][][]in{
		{{{"root", ""}, {"k1", "root"}}, {{"d1", "root"}}},
		{{{"kagent1", "agent"}, {"d2", "agent"}}, {{"kagent2", "agent"}, {"k2", "k1"}}},
	}
	for _, tc := range []struct {
		name     string
		kept     map[string]bool
		wantLeft [][][]string // what the batch has afterwards
		wantPass bool
	}{
		{
			name:     "some go on",
			kept:     map[string]bool{"root": true, "k1": true, "kagent1": true, "kagent2": true, "k2": true},
			wantLeft: [][][]string{{{"root", "k1"}}, {{"k2"}}},
			wantPass: true,
		},
		{
			name:     "one goes on, at the end",
			kept:     map[string]bool{"k2": true, "kagent1": true},
			wantLeft: [][][]string{{{"k2"}}},
			wantPass: true,
		},
		{name: "all held or dropped", kept: map[string]bool{"kagent1": true, "kagent2": true}},
		{name: "all dropped", kept: map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, func(c *Config) { c.Journaled = false })
			td := ptrace.NewTraces()
			var decisions []Decision
			var wantKept []bool
			for _, scopes := range batch {
				rs := td.ResourceSpans().AppendEmpty()
				for _, spans := range scopes {
					ss := rs.ScopeSpans().AppendEmpty()
					for _, s := range spans {
						span := ss.Spans().AppendEmpty()
						span.SetName(s.name)
						span.SetTraceID(testTrace)
						span.SetSpanID(idOf(s.name))
						if s.parent != "" {
							span.SetParentSpanID(idOf(s.parent))
						}
						v := Drop
						if tc.kept[s.name] {
							v = Keep
						}
						decisions = append(decisions, Decision{Verdict: v})
						wantKept = append(wantKept, tc.kept[s.name])
					}
				}
			}
			adm, err := d.m.Admit(client.Info{}, td, decisions)
			require.NoError(t, err)
			assert.Equal(t, wantKept, adm.Kept)
			assert.Equal(t, tc.wantPass, adm.Pass)
			var left [][][]string
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				var scopes [][]string
				sss := td.ResourceSpans().At(i).ScopeSpans()
				for j := 0; j < sss.Len(); j++ {
					var names []string
					for k := 0; k < sss.At(j).Spans().Len(); k++ {
						names = append(names, sss.At(j).Spans().At(k).Name())
					}
					scopes = append(scopes, names)
				}
				left = append(left, scopes)
			}
			assert.Equal(t, tc.wantLeft, left)
		})
	}
}
