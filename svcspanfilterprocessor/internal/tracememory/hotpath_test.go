package tracememory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			setParent(span, newParent)
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
			setParent(span, pcommon.SpanID{})
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
			assert.NotContains(t, tr.waitingOn, a)
			if tc.wantOnB == nil {
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
