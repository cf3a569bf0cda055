// Package recall is a bounded memory of recent answers: at most a fixed
// number of entries, each kept for its own time to live, the least
// recently used evicted first when it is full. The ingest door remembers
// what Gemini answered its confirmations in one, so that a replayed
// delivery costs no Gemini call. It runs on an injected clock and holds no
// package-level state.
package recall

import (
	"container/list"
	"sync"
	"time"
)

// Memory maps keys to values for a while. It is safe for concurrent use.
type Memory[V any] struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	items   map[string]*list.Element
	lru     *list.List // of *entry[V]; front: most recently used
	evicted int64
}

type entry[V any] struct {
	key   string
	value V
	until time.Time // forgotten from then on
}

// New returns an empty memory of at most size entries (at least 1) on the
// clock now.
func New[V any](size int, now func() time.Time) *Memory[V] {
	return &Memory[V]{max: max(size, 1), now: now, items: map[string]*list.Element{}, lru: list.New()}
}

// Get returns the value remembered for key, unless it has expired.
func (m *Memory[V]) Get(key string) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*entry[V])
	if !m.now().Before(e.until) {
		m.remove(el)
		var zero V
		return zero, false
	}
	m.lru.MoveToFront(el)
	return e.value, true
}

// Put remembers value for key for ttl, replacing what key had. A full
// memory forgets the expired entries at its least recently used end, or
// else its least recently used one.
func (m *Memory[V]) Put(key string, value V, ttl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	until := m.now().Add(ttl)
	if el, ok := m.items[key]; ok {
		e := el.Value.(*entry[V])
		e.value, e.until = value, until
		m.lru.MoveToFront(el)
		return
	}
	if m.lru.Len() >= m.max {
		m.makeRoom()
	}
	m.items[key] = m.lru.PushFront(&entry[V]{key: key, value: value, until: until})
}

// makeRoom drops the expired entries at the least recently used end (an
// expired entry further in goes when it is read or reaches the end), and
// if there were none, the least recently used entry. Called with m.mu
// held.
func (m *Memory[V]) makeRoom() {
	now := m.now()
	dropped := false
	for el := m.lru.Back(); el != nil && !now.Before(el.Value.(*entry[V]).until); el = m.lru.Back() {
		m.remove(el)
		dropped = true
	}
	if !dropped {
		m.remove(m.lru.Back())
		m.evicted++
	}
}

func (m *Memory[V]) remove(el *list.Element) {
	delete(m.items, el.Value.(*entry[V]).key)
	m.lru.Remove(el)
}

// Len is how many entries are held, expired ones not yet dropped included.
func (m *Memory[V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len()
}

// Evicted is how many live entries were dropped to make room.
func (m *Memory[V]) Evicted() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evicted
}
