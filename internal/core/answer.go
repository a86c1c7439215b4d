package core

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Bounds on what the core reads of a plugin's answer (Sync and ImportFile
// alike), so that no connector can make the core allocate much more than
// these however it answers.
const (
	// DefaultMaxAnswerBytes bounds the encoded answer: 8 MiB less 64 KiB.
	// A typical transaction with two postings takes about 150 bytes on the
	// wire, so this carries some 55,000 of them: more than a household's
	// years of one account, and deliveries are incremental anyway (a
	// connector delivers the rest from its watermark on the next sync,
	// D-18). A file's delivery is about the size of its rows as protobuf:
	// ibkr-flex's 32 MiB XML statement limit (the owner API's
	// ownerapi.MaxImportBytes too) maps to a few MiB. It stays under 8 MiB by
	// more than Connect's read step (512 bytes), so the buffer Connect reads
	// an answer into, which doubles as it fills, stops at 8 MiB instead of
	// 16: a hostile answer costs the core about twice this per call (the
	// buffer and its smaller predecessors), well under 64 MiB.
	DefaultMaxAnswerBytes = 8<<20 - 64<<10
	// DefaultMaxAnswerMemory bounds what decoding the answer would allocate,
	// estimated from its encoding before anything is decoded: every message
	// costs its Go struct (and its slot when in a list), every string and
	// unknown field its bytes. It stops answers small on the wire that decode to far more
	// (8 MiB of empty transactions are four million structs, over 500 MiB);
	// an answer of ordinary transactions filling DefaultMaxAnswerBytes fits
	// (TestAnswerBoundsFitOrdinaryDeliveries).
	DefaultMaxAnswerMemory = 48 << 20
	// maxAnswerDepth bounds the nesting the estimate follows; a delivery
	// nests four deep.
	maxAnswerDepth = 32
)

// ErrAnswerTooLarge is wrapped when a plugin's answer is larger than the
// core reads: too many bytes, or an encoding that would decode to more memory
// than DefaultMaxAnswerMemory. Nothing of it is stored and the call is not
// retried (the plugin would answer the same); the next scheduled call is
// made as usual.
var ErrAnswerTooLarge = errors.New("the connector's answer is too large")

// errOverBudget is what the codec returns for an answer over its memory
// bound; the caller names it with ErrAnswerTooLarge.
var errOverBudget = errors.New("decoding the answer would allocate more than its bound")

// boundedCodec is the protobuf codec of the core's calls to plugins: it
// refuses an answer whose decoding would allocate more than budget bytes,
// estimated by walking the encoding with the message's schema before
// proto.Unmarshal allocates anything.
type boundedCodec struct{ budget int64 }

// Name is the codec Connect's clients use by default: the same protocol.
func (boundedCodec) Name() string { return "proto" }

// Marshal encodes a request as Connect's own codec does.
func (boundedCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	return proto.Marshal(pm)
}

// Unmarshal estimates the answer's decoded size and decodes it only within
// the budget.
func (c boundedCodec) Unmarshal(data []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	cost, err := decodedCost(data, pm.ProtoReflect().Descriptor(), c.budget, 0)
	if err != nil {
		return err
	}
	// An eighth more for the allocator's rounding up to its size classes.
	if cost+cost/8 > c.budget {
		return errOverBudget
	}
	return proto.Unmarshal(data, pm)
}

// decodedCost estimates the bytes proto.Unmarshal allocates for one message
// of desc encoded as data (the struct itself included), stopping as soon as
// the estimate passes budget. A malformed encoding is an error, as
// proto.Unmarshal would find.
func decodedCost(data []byte, desc protoreflect.MessageDescriptor, budget int64, depth int) (int64, error) {
	if depth > maxAnswerDepth {
		return 0, fmt.Errorf("the answer nests deeper than %d messages", maxAnswerDepth)
	}
	cost := structSize(desc)
	fields := desc.Fields()
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		data = data[n:]
		m := protowire.ConsumeFieldValue(num, typ, data)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		value := data[:m]
		data = data[m:]
		fd := fields.ByNumber(num)
		switch {
		case fd == nil:
			// An unknown field is kept as its bytes.
			cost += int64(n + m)
		case typ == protowire.BytesType && (fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind):
			inner, ierr := protowire.ConsumeBytes(value)
			if ierr < 0 {
				return 0, protowire.ParseError(ierr)
			}
			sub, err := decodedCost(inner, fd.Message(), budget-cost, depth+1)
			if err != nil {
				return 0, err
			}
			cost += sub
			if fd.IsList() || fd.IsMap() {
				cost += 16 // its slot in a slice that doubles as it grows
			}
		case fd.IsList() && typ == protowire.BytesType && fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind:
			// A packed list: at most one element per byte, eight bytes each.
			cost += 8 * int64(m)
		case fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind:
			// Copied out of the encoding, and a slot when in a list.
			cost += int64(m)
			if fd.IsList() {
				cost += 32
			}
		case fd.IsList():
			cost += 16
		}
		if cost > budget {
			return cost, nil
		}
	}
	return cost, nil
}

// structSizes caches the size of each message's generated Go struct.
var structSizes sync.Map // protoreflect.FullName -> int64

// structSize is the size of desc's generated Go struct, or a generous
// guess for a message without one.
func structSize(desc protoreflect.MessageDescriptor) int64 {
	if v, ok := structSizes.Load(desc.FullName()); ok {
		return v.(int64)
	}
	size := int64(256)
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(desc.FullName()); err == nil {
		if t := reflect.TypeOf(mt.Zero().Interface()); t.Kind() == reflect.Pointer {
			size = int64(t.Elem().Size())
		}
	}
	structSizes.Store(desc.FullName(), size)
	return size
}
