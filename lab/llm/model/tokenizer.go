package model

import (
	"unicode"
	"unicode/utf8"
)

// Special token ids. Real chat models reserve ids for their template markers;
// these are the ones the reference model's chat template uses.
const (
	TokPad      int32 = 0
	TokBOS      int32 = 1
	TokEOS      int32 = 2
	TokImStart  int32 = 3 // <|im_start|>
	TokImEnd    int32 = 4 // <|im_end|>
	TokToolCall int32 = 5 // <tool_call>
	TokToolEnd  int32 = 6 // </tool_call>
	TokCLS      int32 = 7
	TokSEP      int32 = 8
	numSpecial        = 16
)

// Tokenizer splits text the way byte-level BPE tokenizers (GPT-4's cl100k,
// Qwen2's) do at the pre-tokenizer stage: words carry their leading space or punctuation character,
// digits come in groups of at most three, punctuation and whitespace runs are
// their own pieces. It then stands in for the learned merges with a length
// rule: a word of up to wordPiece letters is one token and longer words are
// cut into pieces of that size, which lands the count near real tokenizers
// (about 4 characters a token on English prose, about 3 on Go code; see
// TestTokenRatio). Piece strings map to ids by hashing into the vocabulary,
// so ids are stable and spread over the whole embedding table.
//
// A Tokenizer holds no mutable state and is safe for concurrent use.
type Tokenizer struct {
	vocab int
}

// wordPiece is the longest run of letters one token covers. Common English
// words up to about 6 letters are single tokens in real BPE vocabularies.
const wordPiece = 6

// NewTokenizer returns a tokenizer for a vocabulary of the given size (at
// least 1024 ids).
func NewTokenizer(vocab int) *Tokenizer {
	if vocab < 1024 {
		vocab = 1024
	}
	return &Tokenizer{vocab: vocab}
}

// Vocab returns the vocabulary size ids are drawn from.
func (t *Tokenizer) Vocab() int { return t.vocab }

// ID maps a piece to its id.
func (t *Tokenizer) ID(piece string) int32 {
	// FNV-1a, 64 bit.
	h := uint64(14695981039346656037)
	for i := 0; i < len(piece); i++ {
		h ^= uint64(piece[i])
		h *= 1099511628211
	}
	return int32(numSpecial + h%uint64(t.vocab-numSpecial))
}

// Count returns the number of tokens text encodes to, without allocating.
func (t *Tokenizer) Count(text string) int {
	n := 0
	split(text, func(string) { n++ })
	return n
}

// Encode appends the ids of text to dst.
func (t *Tokenizer) Encode(dst []int32, text string) []int32 {
	split(text, func(p string) { dst = append(dst, t.ID(p)) })
	return dst
}

// Pieces returns the pieces text splits into; concatenated they give text back.
func (t *Tokenizer) Pieces(text string) []string {
	var out []string
	split(text, func(p string) { out = append(out, p) })
	return out
}

type class uint8

const (
	clSpace class = iota
	clLetter
	clDigit
	clPunct
)

func classOf(r rune) class {
	if r < utf8.RuneSelf {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_':
			return clLetter
		case r >= '0' && r <= '9':
			return clDigit
		case r == ' ' || r >= '\t' && r <= '\r':
			return clSpace
		default:
			return clPunct
		}
	}
	switch {
	case r == ' ' || r == '\t' || r == '\n' || r == '\r' || unicode.IsSpace(r):
		return clSpace
	case r == '_' || unicode.IsLetter(r) || unicode.IsMark(r):
		return clLetter
	case r >= '0' && r <= '9' || unicode.IsDigit(r):
		return clDigit
	default:
		return clPunct
	}
}

// split calls emit with each piece of s in order.
func split(s string, emit func(string)) {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		c := classOf(r)
		start := i
		// One space or punctuation character before a word belongs to it
		// (" the", ".Stats", "(x"), as in cl100k's pre-tokenizer; a space
		// also joins the punctuation after it (" {", " :=").
		if (r == ' ' || c == clPunct) && i+size < len(s) {
			r2, size2 := utf8.DecodeRuneInString(s[i+size:])
			if c2 := classOf(r2); c2 == clLetter || (r == ' ' && c2 == clPunct) {
				i += size
				r, size, c = r2, size2, c2
			}
		}
		switch c {
		case clLetter:
			n := 0
			for i < len(s) {
				r, size = utf8.DecodeRuneInString(s[i:])
				if classOf(r) != clLetter {
					break
				}
				// Non-ASCII letters are about one token each in real
				// vocabularies trained mostly on English.
				if n == wordPiece || (r >= utf8.RuneSelf && n > 0) {
					emit(s[start:i])
					start, n = i, 0
				}
				i += size
				n++
			}
			emit(s[start:i])
		case clDigit:
			n := 0
			for i < len(s) {
				r, size = utf8.DecodeRuneInString(s[i:])
				if classOf(r) != clDigit {
					break
				}
				if n == 3 {
					emit(s[start:i])
					start, n = i, 0
				}
				i += size
				n++
			}
			emit(s[start:i])
		case clPunct:
			// Runs of punctuation merge up to three (":=", "//", "();").
			n := 0
			for i < len(s) {
				r, size = utf8.DecodeRuneInString(s[i:])
				if classOf(r) != clPunct {
					break
				}
				if n > 0 && i+size < len(s) {
					if r2, _ := utf8.DecodeRuneInString(s[i+size:]); classOf(r2) == clLetter {
						break // r starts the next word
					}
				}
				if n == 3 {
					emit(s[start:i])
					start, n = i, 0
				}
				i += size
				n++
			}
			emit(s[start:i])
		default:
			// Whitespace runs (newline plus indentation) are one piece up to
			// 8 bytes, but leave a lone trailing space to the next word.
			n := 0
			for i < len(s) {
				r, size = utf8.DecodeRuneInString(s[i:])
				if classOf(r) != clSpace {
					break
				}
				if r == ' ' && n > 0 && i+1 < len(s) {
					if r2, _ := utf8.DecodeRuneInString(s[i+1:]); classOf(r2) == clLetter || classOf(r2) == clPunct {
						break
					}
				}
				if n == 8 {
					emit(s[start:i])
					start, n = i, 0
				}
				i += size
				n++
			}
			emit(s[start:i])
		}
	}
}
