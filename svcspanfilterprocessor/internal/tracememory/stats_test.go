package tracememory

// add sums o into s (the test driver's observer).
func (s *Stats) add(o *Stats) {
	for i := range s.Released {
		s.Released[i] += o.Released[i]
	}
	for i := range s.Reparented {
		s.Reparented[i] += o.Reparented[i]
	}
	for i := range s.Evicted {
		s.Evicted[i] += o.Evicted[i]
	}
	s.EvictedWaiting += o.EvictedWaiting
	s.Connectors += o.Connectors
	s.ContentJoined += o.ContentJoined
	for i := range s.ContentUnmatched {
		s.ContentUnmatched[i] += o.ContentUnmatched[i]
	}
	s.ContentWaits = append(s.ContentWaits, o.ContentWaits...)
	s.Discarded += o.Discarded
}
