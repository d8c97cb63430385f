package svcfilestorageextension

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/component"
)

// A segment is an append-only file of records, each
//
//	crc32c (4) | key length (4) | value length (4) | key | value
//
// little-endian, the checksum over everything after it. Records are only appended. Once no key
// of bbolt points at any of its records, a segment is removed, or kept as the spare that a later
// segment is renamed from and written over from its start: the bytes after that segment's last
// record are then an old segment's, which no pointer names (a pointer names segment and offset).

const (
	recordHeaderBytes = 12
	// maxKeyBytes is bbolt's own limit on keys: a longer "key" in a header is not a record.
	maxKeyBytes   = 32768
	segmentSuffix = ".seg"
	// valueDirSuffix ends the name of a component's directory of segments.
	valueDirSuffix = ".values"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type segment struct {
	num      uint64
	path     string
	file     *os.File
	size     int64 // where the next record goes
	fileSize int64 // the file's length: size, or more in a segment that was a spare
	live     int   // records a key of bbolt points at
	// pending: appended to by the batch under way, whose commit will point at it
	pending bool
}

// scannedRecord is a complete record found in a segment at open.
type scannedRecord struct {
	key string
	off int64
}

func segmentName(num uint64) string {
	return fmt.Sprintf("%08d%s", num, segmentSuffix)
}

func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || digits == "" {
		return 0, false
	}
	num, err := strconv.ParseUint(digits, 10, 64)
	return num, err == nil
}

func recordSize(key string, value []byte) int64 {
	return int64(recordHeaderBytes + len(key) + len(value))
}

// createSegment creates an empty segment.
func createSegment(dir string, num uint64) (*segment, error) {
	path := filepath.Join(dir, segmentName(num))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("value file %s: %w", path, err)
	}
	return &segment{num: num, path: path, file: f}, nil
}

// reuse renames an emptied segment to number num, to be written over from its start.
func (s *segment) reuse(dir string, num uint64) error {
	path := filepath.Join(dir, segmentName(num))
	if err := os.Rename(s.path, path); err != nil {
		return err
	}
	s.num, s.path, s.size, s.live = num, path, 0, 0
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openSegment opens a segment left by an earlier run and reads its records' headers and keys
// (not their values). A record cut short at the end (a crash in the middle of an append) ends the
// scan: nothing points at it, since its transaction came after the append.
func openSegment(path string, num uint64) (*segment, []scannedRecord, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("value file %s: %w", path, err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("value file %s: %w", path, err)
	}
	size := info.Size()
	var records []scannedRecord
	var header [recordHeaderBytes]byte
	off := int64(0)
	for off+recordHeaderBytes <= size {
		if _, err := f.ReadAt(header[:], off); err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("value file %s: %w", path, err)
		}
		keyLen := int64(binary.LittleEndian.Uint32(header[4:]))
		valueLen := int64(binary.LittleEndian.Uint32(header[8:]))
		end := off + recordHeaderBytes + keyLen + valueLen
		if keyLen > maxKeyBytes || end > size {
			break // torn
		}
		key := make([]byte, keyLen)
		if _, err := f.ReadAt(key, off+recordHeaderBytes); err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("value file %s: %w", path, err)
		}
		records = append(records, scannedRecord{key: string(key), off: off})
		off = end
	}
	// Never appended to again: a new run starts a new segment.
	return &segment{num: num, path: path, file: f, size: size, fileSize: size}, records, nil
}

// append writes a record after the segment's last one and returns its offset and checksum.
func (s *segment) append(key string, value []byte) (int64, uint32, error) {
	head := make([]byte, recordHeaderBytes+len(key))
	binary.LittleEndian.PutUint32(head[4:], uint32(len(key)))
	binary.LittleEndian.PutUint32(head[8:], uint32(len(value)))
	copy(head[recordHeaderBytes:], key)
	crc := crc32.Update(crc32.Checksum(head[4:], castagnoli), castagnoli, value)
	binary.LittleEndian.PutUint32(head, crc)
	off := s.size
	// Two writes, no copy of the value; whatever stops between them leaves a record that fails
	// its checksum and that no pointer names.
	_, err := s.file.WriteAt(head, off)
	if err == nil {
		_, err = s.file.WriteAt(value, off+int64(len(head)))
	}
	s.fileSize = max(s.fileSize, off+int64(len(head)+len(value)))
	if err != nil {
		return 0, 0, err
	}
	s.size += int64(len(head) + len(value))
	return off, crc, nil
}

// read reads back the value of key from the record p points at, checking the checksum and the key.
func (s *segment) read(key string, p pointer) ([]byte, error) {
	buf := make([]byte, recordHeaderBytes+len(key)+int(p.valueLen))
	if _, err := s.file.ReadAt(buf, p.off); err != nil {
		return nil, fmt.Errorf("value of key %q: value file %s at offset %d: %w", key, s.path, p.off, err)
	}
	crc := binary.LittleEndian.Uint32(buf)
	if crc != p.crc || crc32.Checksum(buf[4:], castagnoli) != crc ||
		binary.LittleEndian.Uint32(buf[4:]) != uint32(len(key)) ||
		binary.LittleEndian.Uint32(buf[8:]) != p.valueLen ||
		string(buf[recordHeaderBytes:recordHeaderBytes+len(key)]) != key {
		return nil, fmt.Errorf("value of key %q: value file %s at offset %d: %w", key, s.path, p.off, errCorruptRecord)
	}
	return buf[recordHeaderBytes+len(key):], nil
}

var errCorruptRecord = errors.New("the record is corrupt (checksum, length or key differ from bbolt's pointer)")

// remove deletes the segment's file.
func (s *segment) remove() error {
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_ = s.file.Close()
	return nil
}

// A pointer is what bbolt keeps under a key whose value is in a segment:
//
//	magic (8) | segment (8) | offset (8) | value length (4) | record crc32c (4) | crc32c of the 32 bytes before (4)
//
// The magic and the pointer's own checksum tell it from any value stored inline.
type pointer struct {
	seg      uint64
	off      int64
	valueLen uint32
	crc      uint32
}

const pointerBytes = 36

var pointerMagic = []byte("\xffsvcvf1\x00")

func encodePointer(p pointer) []byte {
	b := make([]byte, pointerBytes)
	copy(b, pointerMagic)
	binary.LittleEndian.PutUint64(b[8:], p.seg)
	binary.LittleEndian.PutUint64(b[16:], uint64(p.off))
	binary.LittleEndian.PutUint32(b[24:], p.valueLen)
	binary.LittleEndian.PutUint32(b[28:], p.crc)
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	return b
}

func decodePointer(b []byte) (pointer, bool) {
	if len(b) != pointerBytes || !bytes.HasPrefix(b, pointerMagic) ||
		binary.LittleEndian.Uint32(b[32:]) != crc32.Checksum(b[:32], castagnoli) {
		return pointer{}, false
	}
	return pointer{
		seg:      binary.LittleEndian.Uint64(b[8:]),
		off:      int64(binary.LittleEndian.Uint64(b[16:])),
		valueLen: binary.LittleEndian.Uint32(b[24:]),
		crc:      binary.LittleEndian.Uint32(b[28:]),
	}, true
}

// valueDirName is the directory of a component's segments: the name contrib gives the
// component's bbolt file (filestorage v0.161 GetClient), with valueDirSuffix.
func valueDirName(kind component.Kind, id component.ID, name string) string {
	raw := fmt.Sprintf("%s_%s_%s", kindString(kind), id.Type(), id.Name())
	if name != "" {
		raw += "_" + name
	}
	dir := sanitize(raw) + valueDirSuffix
	if len(dir) > 255 { // contrib hashes names the file system refuses
		sum := sha256.Sum256([]byte(raw))
		dir = hex.EncodeToString(sum[:]) + valueDirSuffix
	}
	return dir
}

func kindString(k component.Kind) string {
	switch k {
	case component.KindReceiver:
		return "receiver"
	case component.KindProcessor:
		return "processor"
	case component.KindExporter:
		return "exporter"
	case component.KindExtension:
		return "extension"
	case component.KindConnector:
		return "connector"
	default:
		return "other"
	}
}

// sanitize is contrib's: characters other than letters, digits, '.', '-' and '_' become ~XXXX.
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "~%04X", r)
		}
	}
	return b.String()
}
