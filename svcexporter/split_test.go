package svcexporter

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
)

func TestEvenChunks(t *testing.T) {
	assert.Empty(t, evenChunks(0, 100))
	assert.Equal(t, []itemRange{{0, 100}, {100, 200}, {200, 250}}, evenChunks(250, 100))
	assert.Equal(t, []itemRange{{0, 100}}, evenChunks(100, 100))
	assert.Equal(t, []itemRange{{0, 3}}, evenChunks(3, 100))
}

func TestDeliver(t *testing.T) {
	tooLarge := &statusError{code: 413}
	permanent := consumererror.NewPermanent(&statusError{code: 400})
	retryable := &statusError{code: 503}

	tests := []struct {
		name   string
		n      int
		chunks []itemRange
		// answer decides per request; sent lists the requests made, in order.
		answer        func(r itemRange) error
		wantSent      []itemRange
		wantFrom      int
		wantRetry     bool
		wantPermItems int
		wantTooLarge  []int
		wantSplits    int
	}{
		{
			name: "all accepted", n: 250, chunks: evenChunks(250, 100),
			answer:   func(itemRange) error { return nil },
			wantSent: []itemRange{{0, 100}, {100, 200}, {200, 250}}, wantFrom: 250,
		},
		{
			name: "too large above 2 items, item 5 too large alone", n: 8, chunks: []itemRange{{0, 8}},
			answer: func(r itemRange) error {
				if r.len() > 2 || (r.lo <= 5 && 5 < r.hi) {
					return tooLarge
				}
				return nil
			},
			wantSent: []itemRange{
				{0, 8}, {0, 4}, {0, 2}, {2, 4}, {4, 8}, {4, 6}, {4, 5}, {5, 6}, {6, 8},
			},
			wantFrom: 8, wantTooLarge: []int{5}, wantSplits: 4, // [0,8) [0,4) [4,8) [4,6)
		},
		{
			name: "retryable stops the delivery", n: 250, chunks: evenChunks(250, 100),
			answer: func(r itemRange) error {
				if r.lo == 100 {
					return retryable
				}
				return nil
			},
			wantSent: []itemRange{{0, 100}, {100, 200}}, wantFrom: 100, wantRetry: true,
		},
		{
			name: "permanent does not stop the delivery", n: 250, chunks: evenChunks(250, 100),
			answer: func(r itemRange) error {
				if r.lo == 100 {
					return permanent
				}
				return nil
			},
			wantSent: []itemRange{{0, 100}, {100, 200}, {200, 250}}, wantFrom: 250, wantPermItems: 100,
		},
		{
			name: "retryable inside a split half", n: 4, chunks: []itemRange{{0, 4}},
			answer: func(r itemRange) error {
				switch {
				case r.len() == 4:
					return tooLarge
				case r.lo == 2:
					return retryable
				}
				return nil
			},
			wantSent: []itemRange{{0, 4}, {0, 2}, {2, 4}}, wantFrom: 2, wantRetry: true, wantSplits: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent []itemRange
			res := deliver(tt.n, tt.chunks, func(r itemRange) error {
				sent = append(sent, r)
				return tt.answer(r)
			}, isTooLarge, nil)
			assert.Equal(t, tt.wantSent, sent)
			assert.Equal(t, tt.wantFrom, res.undeliveredFrom)
			assert.Equal(t, tt.wantRetry, res.retryErr != nil)
			assert.Equal(t, tt.wantPermItems, res.permanentItems)
			var large []int
			for _, it := range res.refusedAlone {
				large = append(large, it.index)
			}
			assert.Equal(t, tt.wantTooLarge, large)
			assert.Equal(t, tt.wantSplits, res.splits)
		})
	}
}

func TestIsTooLarge(t *testing.T) {
	assert.True(t, isTooLarge(&statusError{code: 413}))
	assert.True(t, isTooLarge(errors.Join(errors.New("x"), &statusError{code: 413})))
	assert.False(t, isTooLarge(&statusError{code: 400}))
	assert.False(t, isTooLarge(consumererror.NewPermanent(errors.New("413"))))
	assert.False(t, isTooLarge(nil))
}

func TestIsTooLargeOrMalformed(t *testing.T) {
	assert.True(t, isTooLargeOrMalformed(&statusError{code: 413}))
	assert.True(t, isTooLargeOrMalformed(consumererror.NewPermanent(&statusError{code: 400})))
	assert.False(t, isTooLargeOrMalformed(consumererror.NewPermanent(&statusError{code: 401})))
	assert.False(t, isTooLargeOrMalformed(&statusError{code: 500}))
	assert.False(t, isTooLargeOrMalformed(nil))
}

func TestDeliverSplitBudgetFor400(t *testing.T) {
	malformed := consumererror.NewPermanent(&statusError{code: 400})
	for _, tt := range []struct {
		name string
		n    int
		bad  func(r itemRange) bool // the requests answered 400
		// wantAlone are the items refused alone; wantUnsplit the items refused unsplit.
		wantAlone   int
		wantUnsplit int
	}{
		{"every request answered 400", 512, func(itemRange) bool { return true }, -1, -1},
		{"one malformed item", 512, func(r itemRange) bool { return r.lo <= 300 && 300 < r.hi }, 1, 0},
		{"four malformed items", 512, func(r itemRange) bool {
			return slices.ContainsFunc([]int{3, 170, 171, 500}, func(i int) bool { return r.lo <= i && i < r.hi })
		}, 4, 0},
		{"a single item", 1, func(itemRange) bool { return true }, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sent, refused := 0, 0
			res := deliver(tt.n, []itemRange{{0, tt.n}}, func(r itemRange) error {
				sent++
				if tt.bad(r) {
					refused++
					return malformed
				}
				return nil
			}, isTooLargeOrMalformed, isMalformed)
			assert.LessOrEqual(t, refused, splitBudget(tt.n), "the budget counts the 400 answers")
			assert.Equal(t, tt.n, res.undeliveredFrom)
			if tt.wantAlone >= 0 {
				assert.Len(t, res.refusedAlone, tt.wantAlone)
				assert.Equal(t, tt.wantUnsplit, res.unsplitItems)
				assert.Empty(t, res.permanent)
				return
			}
			// Every item is refused, each exactly once, most of them unsplit as one error.
			assert.Equal(t, tt.n, len(res.refusedAlone)+res.unsplitItems)
			assert.Equal(t, res.unsplitItems, res.permanentItems)
			require.Len(t, res.permanent, 1)
			assert.True(t, consumererror.IsPermanent(res.permanent[0]))
			t.Logf("%d requests, %d items refused alone, %d unsplit (budget %d)", sent, len(res.refusedAlone), res.unsplitItems, splitBudget(tt.n))
		})
	}
}

func TestDeliverSplitBudgetLeaves413Unbounded(t *testing.T) {
	sent := 0
	res := deliver(64, []itemRange{{0, 64}}, func(itemRange) error {
		sent++
		return &statusError{code: 413}
	}, isTooLargeOrMalformed, isMalformed)
	assert.Equal(t, 2*64-1, sent, "413 is about sizes: every item is tried alone")
	assert.Len(t, res.refusedAlone, 64)
	assert.Zero(t, res.unsplitItems)
}
