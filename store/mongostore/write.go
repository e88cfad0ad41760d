package mongostore

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tributary-dev/tributary/store/driver"
)

// request is one write on its way to the server.
type request struct {
	i      int // index in the call's writes and results
	kind   writeKind
	cond   driver.ConditionKind
	key    driver.Key
	filter []byte // upsert, replace, delete: which record (and at which revision)
	doc    []byte // upsert, replace: the replacement; insert: the document with its _id
	token  []byte // puts: the revision token stored with the document
	// replace: the type hints the document took, kept for its new revision (typeHints)
	ns, ds string
	hints  typeHints
}

type collGroup struct {
	upserts, inserts []*request
}

// Write implements driver.Store. Unconditional puts go out as one unordered bulk of upserting
// replaceOnes per collection, if-absent puts as one unordered bulk of inserts; conditional
// puts and all deletes go out as individual replaceOne and deleteOne requests, concurrently,
// because a bulk reply does not say which filters matched. With Options.FerretDB the
// unconditional puts go out individually too (see the package documentation).
func (s *Store) Write(ctx context.Context, writes []driver.Write, _ driver.WriteOptions) ([]driver.WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make([]driver.WriteResult, len(writes))
	puts := 0
	for _, w := range writes {
		if w.Kind == driver.Put {
			puts++
		}
	}
	tokens, err := s.tokens(puts)
	if err != nil {
		return nil, driver.NewError(driver.KindInternal, "mongostore: no randomness for revision tokens", err)
	}

	groups := make(map[collName]*collGroup)
	var order []collName
	type single struct {
		coll collName
		req  *request
	}
	var singles []single
	for i, w := range writes {
		r, err := s.prepare(i, w, &tokens)
		if err != nil {
			out[i] = driver.WriteResult{Err: err}
			continue
		}
		c := collName{w.Addr.Namespace, w.Addr.Dataset}
		switch {
		case r.kind == kindInsert || (r.kind == kindUpsert && !s.opts.FerretDB):
			g := groups[c]
			if g == nil {
				g = &collGroup{}
				groups[c] = g
				order = append(order, c)
			}
			if r.kind == kindUpsert {
				g.upserts = append(g.upserts, r)
			} else {
				g.inserts = append(g.inserts, r)
			}
		default:
			singles = append(singles, single{c, r})
		}
	}

	var jobs []func()
	for _, c := range order {
		g := groups[c]
		for _, reqs := range [][]*request{g.upserts, g.inserts} {
			if len(reqs) > 0 {
				jobs = append(jobs, func() { s.bulk(ctx, s.collection(c.ns, c.ds), reqs, out) })
			}
		}
	}
	for _, sg := range singles {
		jobs = append(jobs, func() { out[sg.req.i] = s.single(ctx, s.collection(sg.coll.ns, sg.coll.ds), sg.req) })
	}
	s.parallel(ctx, len(jobs), func(j int) { jobs[j]() })
	return out, nil
}

// tokens returns n fresh revision tokens from one read of the random source.
func (s *Store) tokens(n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n*tokenLength)
	s.randMu.Lock()
	defer s.randMu.Unlock()
	_, err := io.ReadFull(s.opts.Rand, b)
	return b, err
}

// prepare encodes one write into its request. Its errors are the write's result.
func (s *Store) prepare(i int, w driver.Write, tokens *[]byte) (*request, error) {
	meta := s.opts.MetadataField
	r := &request{i: i, cond: w.Cond.Kind, key: w.Addr.Key}
	var rev *revision
	if w.Cond.Kind == driver.IfRevision {
		p, err := parseRevision(w.Cond.Revision)
		if err != nil {
			return nil, err
		}
		rev = &p
	} else if w.Cond.Kind != driver.Unconditional && w.Cond.Kind != driver.IfAbsent {
		return nil, invalid("unknown condition")
	}
	switch w.Kind {
	case driver.Put:
		r.token, *tokens = (*tokens)[:tokenLength:tokenLength], (*tokens)[tokenLength:]
		// The document is built in place: length, [_id], the user's members, metadata, end.
		buf := make([]byte, 4, len(w.Doc.JSON)+len(w.Doc.JSON)/4+64)
		switch w.Cond.Kind {
		case driver.Unconditional:
			r.kind = kindUpsert
			r.filter = filterFor(w.Addr.Key, meta, nil)
		case driver.IfAbsent:
			r.kind = kindInsert
			buf = appendID(buf, w.Addr.Key)
		case driver.IfRevision:
			r.kind = kindReplace
			r.filter = filterFor(w.Addr.Key, meta, rev)
		}
		var hints typeHints
		if rev != nil {
			// A read-modify-write: values keep the BSON types its read found where their JSON
			// text alone would give another type (typeHints).
			hints = s.hints.lookup(w.Addr.Namespace, w.Addr.Dataset, w.Addr.Key, w.Cond.Revision)
		}
		buf, applied, err := encodeBodyHinted(w.Doc, meta, s.opts.FerretDB, hints, buf)
		if err != nil {
			return nil, err
		}
		if applied != nil {
			r.ns, r.ds, r.hints = w.Addr.Namespace, w.Addr.Dataset, applied
		}
		buf = appendMeta(buf, meta, r.token)
		buf = append(buf, 0)
		if len(buf) > maxBSONBytes {
			return nil, driver.NewError(driver.KindTooLarge, "mongostore: the document is "+strconv.Itoa(len(buf))+
				" bytes as BSON, more than MongoDB's limit of "+strconv.Itoa(maxBSONBytes), nil)
		}
		binary.LittleEndian.PutUint32(buf, uint32(len(buf)))
		r.doc = buf
	case driver.Delete:
		r.kind = kindDelete
		r.filter = filterFor(w.Addr.Key, meta, rev)
	default:
		return nil, invalid("unknown write kind")
	}
	return r, nil
}

// bulk sends one unordered bulk of upserts or of inserts to one collection.
func (s *Store) bulk(ctx context.Context, coll *mongo.Collection, reqs []*request, out []driver.WriteResult) {
	models := make([]mongo.WriteModel, len(reqs))
	for j, r := range reqs {
		if r.kind == kindUpsert {
			models[j] = mongo.NewReplaceOneModel().SetFilter(bson.Raw(r.filter)).SetReplacement(bson.Raw(r.doc)).SetUpsert(true)
		} else {
			models[j] = mongo.NewInsertOneModel().SetDocument(bson.Raw(r.doc))
		}
	}
	res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	failed := make(map[int]error)
	var wceErr error
	if err != nil {
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) {
			e := newBackendError(callErrKind(ctx, err, true), "bulk write", err)
			for _, r := range reqs {
				out[r.i] = driver.WriteResult{Err: e}
			}
			return
		}
		var unsure []mongo.BulkWriteError
		for _, we := range bwe.WriteErrors {
			if we.Index < 0 || we.Index >= len(reqs) {
				continue
			}
			if _, known := dupOnID(we.Message, we.Raw); duplicateCodes[we.Code] && !known {
				unsure = append(unsure, we)
				continue
			}
			failed[we.Index] = itemError(reqs[we.Index].kind, we.Code, we.Message, we.Raw, err)
		}
		s.resolveDuplicates(ctx, coll, reqs, unsure, failed, err)
		if k, ok := writeConcernKind(err); ok {
			wceErr = newBackendError(k, "the write was applied but its write concern failed", err)
		}
	}
	// Created or updated: the reply lists the upserted _ids. Its indexes are not used, because
	// FerretDB numbers upserts among upserts rather than among the bulk's statements; the _ids
	// of one bulk are distinct, so they identify the writes on every server.
	upserted := make(map[driver.Key]bool)
	if res != nil {
		for _, id := range res.UpsertedIDs {
			if k, ok := keyOfValue(id); ok {
				upserted[k] = true
			}
		}
	}
	// Every upsert that did not fail either matched or upserted. A reply that accounts for
	// fewer cannot tell a creation from a replacement, nor even whether the put was applied:
	// FerretDB 1.x stops an update batch at its first failing statement, ordered or not, and
	// then leaves every count out. Say so rather than guess.
	var unknown error
	if reqs[0].kind == kindUpsert && (res == nil || res.MatchedCount+res.UpsertedCount != int64(len(reqs)-len(failed))) {
		unknown = driver.NewError(driver.KindOutcomeUnknown, "mongostore: the server's bulk reply does not account for this put, which may or may not "+
			"have been applied (FerretDB 1.x replies so when another put of the bulk fails; set Options.FerretDB)", nil)
	}
	for j, r := range reqs {
		switch {
		case failed[j] != nil:
			out[r.i] = driver.WriteResult{Err: failed[j]}
		case wceErr != nil:
			out[r.i] = driver.WriteResult{Err: wceErr}
		case unknown != nil:
			out[r.i] = driver.WriteResult{Err: unknown}
		case r.kind == kindInsert || upserted[r.key]:
			out[r.i] = driver.WriteResult{Outcome: driver.Created, Revision: tokenRevision(r.token)}
		default:
			out[r.i] = driver.WriteResult{Outcome: driver.Updated, Revision: tokenRevision(r.token)}
		}
	}
}

// resolveDuplicates classifies duplicate-key errors whose index the server did not name
// (FerretDB): when the record now exists, the _id collided (the insert found a record, or the
// upsert lost a race with one); when it does not, a unique secondary index refused the
// document. One $in query answers for all of them; if it fails, the _id is assumed.
func (s *Store) resolveDuplicates(ctx context.Context, coll *mongo.Collection, reqs []*request, unsure []mongo.BulkWriteError, failed map[int]error, cause error) {
	if len(unsure) == 0 {
		return
	}
	var ids []byte
	for n, we := range unsure {
		ids = appendKeyValue(ids, strconv.Itoa(n), reqs[we.Index].key)
	}
	exists := make(map[driver.Key]bool)
	cur, err := coll.Find(ctx, bson.Raw(inFilter(ids)), options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err == nil {
		for cur.Next(ctx) {
			if k, ok := idOf(cur.Current); ok {
				exists[k] = true
			}
		}
		err = cur.Err()
		_ = cur.Close(context.WithoutCancel(ctx))
	}
	for _, we := range unsure {
		r := reqs[we.Index]
		failed[we.Index] = itemErrorOfKind(dupKind(r.kind, err != nil || exists[r.key]), we.Code, cause)
	}
}

// single sends one conditional put, one delete, or (on FerretDB) one unconditional put.
func (s *Store) single(ctx context.Context, coll *mongo.Collection, r *request) driver.WriteResult {
	switch {
	case r.kind == kindUpsert:
		res, err := coll.ReplaceOne(ctx, bson.Raw(r.filter), bson.Raw(r.doc), options.Replace().SetUpsert(true))
		if err != nil {
			var we mongo.WriteException
			if errors.As(err, &we) && len(we.WriteErrors) == 1 && duplicateCodes[we.WriteErrors[0].Code] {
				if _, known := dupOnID(we.WriteErrors[0].Message, we.WriteErrors[0].Raw); !known {
					failed := map[int]error{}
					s.resolveDuplicates(ctx, coll, []*request{r}, []mongo.BulkWriteError{{WriteError: we.WriteErrors[0]}}, failed, err)
					return driver.WriteResult{Err: failed[0]}
				}
			}
			return driver.WriteResult{Err: singleError(ctx, r.kind, "replace", err)}
		}
		if res.UpsertedCount > 0 {
			return driver.WriteResult{Outcome: driver.Created, Revision: tokenRevision(r.token)}
		}
		return driver.WriteResult{Outcome: driver.Updated, Revision: tokenRevision(r.token)}
	case r.kind == kindReplace:
		res, err := coll.ReplaceOne(ctx, bson.Raw(r.filter), bson.Raw(r.doc))
		if err != nil {
			return driver.WriteResult{Err: singleError(ctx, r.kind, "replace", err)}
		}
		if res.MatchedCount == 0 {
			return driver.WriteResult{Err: driver.NewError(driver.KindConflict, "mongostore: the record is not at the given revision", nil)}
		}
		rev := tokenRevision(r.token)
		if r.hints != nil {
			// The next read-modify-write may start from this write's revision rather than a
			// read (the Service remembers what it wrote): the types the values kept hold for it.
			s.hints.record(r.ns, r.ds, r.key, rev, r.hints)
		}
		return driver.WriteResult{Outcome: driver.Updated, Revision: rev}
	case r.cond == driver.IfAbsent:
		// A delete that requires absence deletes nothing: it only checks.
		err := coll.FindOne(ctx, bson.Raw(r.filter), options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			return driver.WriteResult{Outcome: driver.Absent}
		case err != nil:
			return driver.WriteResult{Err: newBackendError(callErrKind(ctx, err, false), "find", err)}
		}
		return driver.WriteResult{Err: driver.NewError(driver.KindAlreadyExists, "mongostore: the record exists", nil)}
	}
	res, err := coll.DeleteOne(ctx, bson.Raw(r.filter))
	if err != nil {
		return driver.WriteResult{Err: singleError(ctx, r.kind, "delete", err)}
	}
	switch {
	case res.DeletedCount > 0:
		return driver.WriteResult{Outcome: driver.Deleted}
	case r.cond == driver.IfRevision:
		return driver.WriteResult{Err: driver.NewError(driver.KindConflict, "mongostore: the record is not at the given revision", nil)}
	}
	return driver.WriteResult{Outcome: driver.Absent}
}

func singleError(ctx context.Context, kind writeKind, what string, err error) error {
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		e := we.WriteErrors[0]
		return itemError(kind, e.Code, e.Message, e.Raw, err)
	}
	return newBackendError(callErrKind(ctx, err, true), what, err)
}

func itemError(kind writeKind, code int, msg string, raw bson.Raw, cause error) error {
	return itemErrorOfKind(itemErrKind(kind, code, msg, raw), code, cause)
}

func itemErrorOfKind(k driver.ErrorKind, code int, cause error) error {
	text := "write error code " + strconv.Itoa(code)
	switch k {
	case driver.KindAlreadyExists:
		text = "the record exists (" + text + ")"
	case driver.KindUnavailable:
		text = "the write was not applied (" + text + ")"
	}
	return &driver.Error{Kind: k, Err: &backendError{msg: "mongostore: " + text, err: cause}}
}

// keyOfValue maps an _id the driver decoded (an upserted id) back to a key.
func keyOfValue(v any) (driver.Key, bool) {
	switch v := v.(type) {
	case string:
		return driver.NewStringKey(v), true
	case int64:
		return driver.NewInt64Key(v), true
	case int32:
		return driver.NewInt64Key(int64(v)), true
	case bson.Binary:
		if v.Subtype == 0 {
			return driver.NewBytesKey(v.Data), true
		}
	case bson.ObjectID:
		return driver.NewObjectIDKey(v), true
	}
	return driver.Key{}, false
}
