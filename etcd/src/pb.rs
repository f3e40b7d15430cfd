//! The etcd v3 messages kubeling sends and reads, declared from etcd's `api/etcdserverpb/rpc.proto` and
//! `api/mvccpb/kv.proto` (same field numbers and types, so the wire format is etcd's). Only the fields
//! kubeling uses are declared; protobuf skips the others when decoding.

/// `etcdserverpb.ResponseHeader`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseHeader {
    /// The cluster's id.
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    /// The answering member's id.
    #[prost(uint64, tag = "2")]
    pub member_id: u64,
    /// The key-value store's revision when the request was applied.
    #[prost(int64, tag = "3")]
    pub revision: i64,
    /// The raft term.
    #[prost(uint64, tag = "4")]
    pub raft_term: u64,
}

/// `mvccpb.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The revision of the key's last creation.
    #[prost(int64, tag = "2")]
    pub create_revision: i64,
    /// The revision of the key's last modification.
    #[prost(int64, tag = "3")]
    pub mod_revision: i64,
    /// Modifications since the creation.
    #[prost(int64, tag = "4")]
    pub version: i64,
    /// The value.
    #[prost(bytes = "vec", tag = "5")]
    pub value: Vec<u8>,
    /// The attached lease.
    #[prost(int64, tag = "6")]
    pub lease: i64,
}

/// `etcdserverpb.RangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeRequest {
    /// The first key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The end of the range, exclusive (empty: `key` alone).
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    /// At most this many keys (0: no limit).
    #[prost(int64, tag = "3")]
    pub limit: i64,
    /// Read at this revision (0: the newest).
    #[prost(int64, tag = "4")]
    pub revision: i64,
    /// Serve from the local member without a quorum read.
    #[prost(bool, tag = "7")]
    pub serializable: bool,
    /// Keys only, no values.
    #[prost(bool, tag = "8")]
    pub keys_only: bool,
    /// The count only.
    #[prost(bool, tag = "9")]
    pub count_only: bool,
}

/// `etcdserverpb.RangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The keys and values.
    #[prost(message, repeated, tag = "2")]
    pub kvs: Vec<KeyValue>,
    /// More keys follow the limit.
    #[prost(bool, tag = "3")]
    pub more: bool,
    /// The number of keys in the range.
    #[prost(int64, tag = "4")]
    pub count: i64,
}

/// `etcdserverpb.PutRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutRequest {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The value.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `etcdserverpb.PutResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}

/// `etcdserverpb.DeleteRangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRangeRequest {
    /// The first key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The end of the range, exclusive (empty: `key` alone).
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
}

/// `etcdserverpb.DeleteRangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRangeResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// How many keys were deleted.
    #[prost(int64, tag = "2")]
    pub deleted: i64,
}

/// `etcdserverpb.Compare`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Compare {
    /// `CompareResult`: EQUAL = 0, GREATER = 1, LESS = 2, NOT_EQUAL = 3.
    #[prost(int32, tag = "1")]
    pub result: i32,
    /// `CompareTarget`: VERSION = 0, CREATE = 1, MOD = 2, VALUE = 3, LEASE = 4.
    #[prost(int32, tag = "2")]
    pub target: i32,
    /// The key compared.
    #[prost(bytes = "vec", tag = "3")]
    pub key: Vec<u8>,
    /// What it is compared with.
    #[prost(oneof = "CompareTargetUnion", tags = "4, 5, 6, 7, 8")]
    pub target_union: Option<CompareTargetUnion>,
}

/// `Compare.target_union`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum CompareTargetUnion {
    /// The key's version.
    #[prost(int64, tag = "4")]
    Version(i64),
    /// The key's creation revision.
    #[prost(int64, tag = "5")]
    CreateRevision(i64),
    /// The key's modification revision.
    #[prost(int64, tag = "6")]
    ModRevision(i64),
    /// The key's value.
    #[prost(bytes = "vec", tag = "7")]
    Value(Vec<u8>),
    /// The key's lease.
    #[prost(int64, tag = "8")]
    Lease(i64),
}

/// `Compare.result` EQUAL.
pub const COMPARE_EQUAL: i32 = 0;
/// `Compare.target` MOD.
pub const TARGET_MOD: i32 = 2;

/// `etcdserverpb.RequestOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestOp {
    /// The operation.
    #[prost(oneof = "Request", tags = "1, 2, 3")]
    pub request: Option<Request>,
}

/// `RequestOp.request`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Request {
    /// A range.
    #[prost(message, tag = "1")]
    Range(RangeRequest),
    /// A put.
    #[prost(message, tag = "2")]
    Put(PutRequest),
    /// A delete.
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeRequest),
}

/// `etcdserverpb.ResponseOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseOp {
    /// The operation's answer.
    #[prost(oneof = "Response", tags = "1, 2, 3")]
    pub response: Option<Response>,
}

/// `ResponseOp.response`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Response {
    /// A range's.
    #[prost(message, tag = "1")]
    Range(RangeResponse),
    /// A put's.
    #[prost(message, tag = "2")]
    Put(PutResponse),
    /// A delete's.
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeResponse),
}

/// `etcdserverpb.TxnRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnRequest {
    /// All must hold for `success` to run; else `failure` runs.
    #[prost(message, repeated, tag = "1")]
    pub compare: Vec<Compare>,
    /// Run when every comparison holds.
    #[prost(message, repeated, tag = "2")]
    pub success: Vec<RequestOp>,
    /// Run otherwise.
    #[prost(message, repeated, tag = "3")]
    pub failure: Vec<RequestOp>,
}

/// `etcdserverpb.TxnResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnResponse {
    /// The header; its revision is the transaction's when it wrote.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// Whether the comparisons held.
    #[prost(bool, tag = "2")]
    pub succeeded: bool,
    /// The answers of the operations run.
    #[prost(message, repeated, tag = "3")]
    pub responses: Vec<ResponseOp>,
}

/// `etcdserverpb.WatchRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchRequest {
    /// The request.
    #[prost(oneof = "WatchRequestUnion", tags = "1, 2, 3")]
    pub request_union: Option<WatchRequestUnion>,
}

/// `WatchRequest.request_union`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum WatchRequestUnion {
    /// Start a watch.
    #[prost(message, tag = "1")]
    Create(WatchCreateRequest),
    /// Cancel one.
    #[prost(message, tag = "2")]
    Cancel(WatchCancelRequest),
    /// Ask for a progress notification.
    #[prost(message, tag = "3")]
    Progress(WatchProgressRequest),
}

/// `etcdserverpb.WatchCreateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchCreateRequest {
    /// The first key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The end of the range, exclusive.
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    /// The first revision to send (0: from now).
    #[prost(int64, tag = "3")]
    pub start_revision: i64,
    /// Send empty responses with the current revision while idle.
    #[prost(bool, tag = "4")]
    pub progress_notify: bool,
    /// Also send each key's previous value.
    #[prost(bool, tag = "6")]
    pub prev_kv: bool,
}

/// `etcdserverpb.WatchCancelRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchCancelRequest {
    /// The watch.
    #[prost(int64, tag = "1")]
    pub watch_id: i64,
}

/// `etcdserverpb.WatchProgressRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchProgressRequest {}

/// `etcdserverpb.WatchResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchResponse {
    /// The header; with no events, a progress notification of this revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The watch.
    #[prost(int64, tag = "2")]
    pub watch_id: i64,
    /// The answer to a create.
    #[prost(bool, tag = "3")]
    pub created: bool,
    /// The watch ended.
    #[prost(bool, tag = "4")]
    pub canceled: bool,
    /// Set when the start revision was compacted: the oldest revision left.
    #[prost(int64, tag = "5")]
    pub compact_revision: i64,
    /// Why the watch ended.
    #[prost(string, tag = "6")]
    pub cancel_reason: String,
    /// The changes, in revision order.
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<WatchEvent>,
}

/// `mvccpb.Event`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchEvent {
    /// PUT = 0, DELETE = 1.
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// The key after the change (for a delete: the key and the deletion's revision).
    #[prost(message, optional, tag = "2")]
    pub kv: Option<KeyValue>,
    /// The key before, when asked for.
    #[prost(message, optional, tag = "3")]
    pub prev_kv: Option<KeyValue>,
}

/// `mvccpb.Event.type` DELETE.
pub const EVENT_DELETE: i32 = 1;

/// `etcdserverpb.StatusRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {}

/// `etcdserverpb.StatusResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The member's etcd version.
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `etcdserverpb.CompactionRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionRequest {
    /// Drop the history before this revision.
    #[prost(int64, tag = "1")]
    pub revision: i64,
    /// Wait until the compaction is applied on disk.
    #[prost(bool, tag = "2")]
    pub physical: bool,
}

/// `etcdserverpb.CompactionResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}
