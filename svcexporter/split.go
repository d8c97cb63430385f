package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"errors"
	"fmt"
	"math/bits"
	"net/http"

	"go.opentelemetry.io/collector/consumer/consumererror"
)

// itemRange is the half-open range [lo, hi) of the items (spans or scores) of one push that one
// HTTP request carries.
type itemRange struct{ lo, hi int }

func (r itemRange) len() int { return r.hi - r.lo }

// refusedItem is an item the platform refused (413, or 400 where the caller splits on it) even in
// a request of its own.
type refusedItem struct {
	index int
	err   error
}

// deliveryResult says what happened to the items of one push.
type deliveryResult struct {
	// undeliveredFrom is the first item not yet handled when a retryable error stopped the
	// delivery (retryErr); every item from there on is still to be sent. Items before it were
	// delivered, dropped as too large, or refused for good. It equals the item count when
	// the delivery ran to the end.
	undeliveredFrom int
	retryErr        error
	// permanent holds the requests the platform refused for good (4xx other than 429 and those
	// the caller splits on), with the number of items each carried.
	permanent      []error
	permanentItems int
	// refusedAlone are the items refused even in a request of their own.
	refusedAlone []refusedItem
	splits       int
	// unsplitItems are the items refused for good, unsplit, once the push's budget of answers
	// to split on (splitBudget) was spent; they are also in permanent and permanentItems.
	unsplitItems int
}

// splitBudget is how many answers a budgeted error (400) may get in one push of n items (the
// first and 4 per halving level); the last of them ends the splitting. One malformed span fails
// one half per level (about log2(n) answers), and a few of them stay well within it, while a 400
// that is not about one span (a proxy, an encoding the platform does not take) would otherwise
// split the push down to single items: 2n-1 requests and n refusals.
func splitBudget(n int) int {
	return 1 + 4*bits.Len(uint(max(n-1, 0))) // bits.Len(n-1) is log2(n) rounded up
}

// deliver sends the items of chunks (in order, covering [0, n) without gaps) through send.
// A request the platform refuses with an error splitOn holds for (413 too large; for spans also
// 400, one malformed span refusing the whole request) is split in halves that are sent in its
// place, recursively, so such an answer never loses more than the single items refused on their
// own. Delivery stops at the first retryable error, so that a retry of
// [undeliveredFrom, n) resends nothing the platform already has: requests go out left to
// right, hence everything before the failed request has been handled. Splits on errors budgeted
// holds for (nil: none) stop at the splitBudget(n)-th such answer: the request answered last and
// every one not sent yet are then refused for good together, as one error.
func deliver(n int, chunks []itemRange, send func(itemRange) error, splitOn, budgeted func(error) bool) deliveryResult {
	res := deliveryResult{undeliveredFrom: n}
	budget := splitBudget(n)
	// A stack, the next request on top.
	pending := make([]itemRange, 0, len(chunks)+8)
	for i := len(chunks) - 1; i >= 0; i-- {
		pending = append(pending, chunks[i])
	}
	for len(pending) > 0 {
		r := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		err := send(r)
		switch {
		case err == nil:
		case splitOn(err):
			if budgeted != nil && budgeted(err) {
				if budget--; budget <= 0 && (r.len() > 1 || len(pending) > 0) {
					res.refuseUnsplit(r, pending, err)
					pending = pending[:0]
					continue
				}
			}
			if r.len() == 1 {
				res.refusedAlone = append(res.refusedAlone, refusedItem{index: r.lo, err: err})
				continue
			}
			mid := r.lo + r.len()/2
			pending = append(pending, itemRange{mid, r.hi}, itemRange{r.lo, mid})
			res.splits++
		case consumererror.IsPermanent(err):
			res.permanent = append(res.permanent, err)
			res.permanentItems += r.len()
		default:
			res.undeliveredFrom = r.lo
			res.retryErr = err
			return res
		}
	}
	return res
}

// refuseUnsplit refuses r and the requests still pending for good, as one error.
func (res *deliveryResult) refuseUnsplit(r itemRange, pending []itemRange, err error) {
	rest := r.len()
	for _, p := range pending {
		rest += p.len()
	}
	res.permanent = append(res.permanent, consumererror.NewPermanent(fmt.Errorf(
		"%d items not split further: the platform gave this answer to more requests of the batch than single malformed items explain: %w", rest, err)))
	res.permanentItems += rest
	res.unsplitItems = rest
}

func isTooLarge(err error) bool { return hasStatus(err, http.StatusRequestEntityTooLarge) }

func isMalformed(err error) bool { return hasStatus(err, http.StatusBadRequest) }

// isTooLargeOrMalformed holds for 413 and 400: the platform refuses a whole span request for one
// span with a malformed id or structure, so halves find the spans it would accept.
func isTooLargeOrMalformed(err error) bool {
	return hasStatus(err, http.StatusRequestEntityTooLarge) || hasStatus(err, http.StatusBadRequest)
}

func hasStatus(err error, code int) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == code
}

// evenChunks cuts [0, n) into consecutive ranges of at most size items.
func evenChunks(n, size int) []itemRange {
	chunks := make([]itemRange, 0, (n+size-1)/size)
	for lo := 0; lo < n; lo += size {
		chunks = append(chunks, itemRange{lo, min(lo+size, n)})
	}
	return chunks
}
