//! The `paywatch.v1.Payments` service: each call parses its request into the query's
//! parameters and answers with `paywatch-query`, as the HTTP API does. Reads a replica may
//! answer are routed by the `paywatch-consistency` metadata (`primary` or `replica`), and
//! say where they were read in the answer's metadata, as the HTTP API's headers do.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use paywatch_query::{
    BatchItem, Consistency, ExpectedParams, ListParams, Queries, QueryError, ReadRoute, TransferParams,
    event_kinds, event_stream, list_page, list_reviews, lookup_authorization, lookup_batch, lookup_expected,
    payment_evidence, payment_history, payment_proof, published_review, totals, transfer_page,
};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Request, Response, Status};

use crate::proto::payments_server::Payments;
use crate::proto::{
    Authorization, BatchGetPaymentsRequest, BatchGetPaymentsResponse, GetAuthorizationRequest,
    GetHistoryRequest, GetPaymentRequest, GetProofRequest, GetReviewRequest, GetTotalsRequest,
    ListPaymentsRequest, ListPaymentsResponse, ListReviewsRequest, ListReviewsResponse, ListTransfersRequest,
    ListTransfersResponse, Payment, PaymentEvent, PaymentHistory, PaymentProof, Review, Totals,
    TransactionEvidence, WatchPaymentsRequest,
};
use crate::status::status_of;

/// The service, over the queries both APIs serve.
#[derive(Clone)]
pub struct PaymentsService {
    queries: Arc<Queries>,
}

impl PaymentsService {
    /// The service answering from `queries`.
    pub fn new(queries: Arc<Queries>) -> Self {
        Self { queries }
    }

    /// `op` read where the request's `paywatch-consistency` metadata routes it (again on
    /// the primary when the replica fails it), answered with metadata saying where.
    async fn read<T, V, Fut>(
        &self,
        metadata: &MetadataMap,
        op: impl Fn(Arc<Queries>) -> Fut,
    ) -> Result<Response<T>, Status>
    where
        V: Into<T>,
        Fut: Future<Output = Result<V, QueryError>>,
    {
        let consistency = match metadata.get(CONSISTENCY) {
            None => Consistency::default(),
            Some(value) => Consistency::parse(value.to_str().unwrap_or_default()).map_err(status_of)?,
        };
        let (answer, route) = self.queries.read(consistency, op).await;
        Ok(self.routed(answer.map_err(status_of)?.into(), &route))
    }

    /// `answer` with metadata saying where it was read, when a replica is configured.
    fn routed<T>(&self, answer: T, route: &ReadRoute) -> Response<T> {
        let mut response = Response::new(answer);
        if self.queries.replica.is_some() {
            for (name, value) in route.described() {
                if let Ok(value) = MetadataValue::try_from(value) {
                    response.metadata_mut().insert(name, value);
                }
            }
        }
        response
    }
}

/// The listing's parameters from a request that carries its filter fields under the same
/// names (`ListPaymentsRequest`, `GetTotalsRequest`, `ListReviewsRequest`), with the
/// paging and grouping each takes.
macro_rules! listing_filter {
    ($request:ident, limit: $limit:expr, cursor: $cursor:expr, group_by: $group_by:expr) => {
        ListParams {
            network: Some($request.network).filter(|n| !n.is_empty()),
            payer: $request.payer,
            pay_to: $request.pay_to,
            asset: $request.asset,
            memo: $request.memo,
            facilitator: $request.facilitator,
            state: $request.state,
            method: $request.method,
            from: $request.from,
            to: $request.to,
            limit: $limit,
            cursor: $cursor,
            group_by: $group_by,
        }
    };
}

/// The request metadata that routes a read: `primary` or `replica` (the default).
const CONSISTENCY: &str = "paywatch-consistency";

/// The stream `WatchPayments` answers.
type EventStream = Pin<Box<dyn Stream<Item = Result<PaymentEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Payments for PaymentsService {
    async fn get_payment(&self, request: Request<GetPaymentRequest>) -> Result<Response<Payment>, Status> {
        let (metadata, asked) = (request.metadata().clone(), request.into_inner());
        self.read(&metadata, |queries| {
            let asked = asked.clone();
            async move {
                let expected = ExpectedParams {
                    payer: asked.expect_payer,
                    pay_to: asked.expect_pay_to,
                    amount: asked.expect_amount,
                    asset: asked.expect_asset,
                };
                lookup_expected(&queries, &asked.network, &asked.payment, asked.index, &expected).await
            }
        })
        .await
    }

    async fn batch_get_payments(
        &self,
        request: Request<BatchGetPaymentsRequest>,
    ) -> Result<Response<BatchGetPaymentsResponse>, Status> {
        let (metadata, asked) = (request.metadata().clone(), request.into_inner());
        let lookups: Vec<BatchItem> = asked.lookups.into_iter().map(BatchItem::from).collect();
        self.read(&metadata, |queries| {
            let lookups = lookups.clone();
            async move { lookup_batch(&queries, lookups).await }
        })
        .await
    }

    async fn get_history(
        &self,
        request: Request<GetHistoryRequest>,
    ) -> Result<Response<PaymentHistory>, Status> {
        let (metadata, asked) = (request.metadata().clone(), request.into_inner());
        self.read(&metadata, |queries| {
            let asked = asked.clone();
            async move { payment_history(&queries, &asked.network, &asked.payment, asked.index).await }
        })
        .await
    }

    async fn list_payments(
        &self,
        request: Request<ListPaymentsRequest>,
    ) -> Result<Response<ListPaymentsResponse>, Status> {
        let (metadata, request) = (request.metadata().clone(), request.into_inner());
        let params = listing_filter!(request, limit: request.limit, cursor: request.cursor, group_by: None);
        self.read(&metadata, |queries| {
            let params = params.clone();
            async move { list_page(&queries, &params).await }
        })
        .await
    }

    async fn get_totals(&self, request: Request<GetTotalsRequest>) -> Result<Response<Totals>, Status> {
        let (metadata, request) = (request.metadata().clone(), request.into_inner());
        let params = listing_filter!(request, limit: None, cursor: None, group_by: request.group_by);
        self.read(&metadata, |queries| {
            let params = params.clone();
            async move { totals(&queries, &params).await }
        })
        .await
    }

    async fn get_review(&self, request: Request<GetReviewRequest>) -> Result<Response<Review>, Status> {
        let (metadata, asked) = (request.metadata().clone(), request.into_inner());
        self.read(&metadata, |queries| {
            let asked = asked.clone();
            async move {
                published_review(&queries, &asked.network, &asked.payment, asked.index, asked.proof).await
            }
        })
        .await
    }

    async fn list_reviews(
        &self,
        request: Request<ListReviewsRequest>,
    ) -> Result<Response<ListReviewsResponse>, Status> {
        let (metadata, request) = (request.metadata().clone(), request.into_inner());
        let params = listing_filter!(request, limit: request.limit, cursor: request.cursor, group_by: None);
        self.read(&metadata, |queries| {
            let params = params.clone();
            async move { list_reviews(&queries, &params).await }
        })
        .await
    }

    async fn list_transfers(
        &self,
        request: Request<ListTransfersRequest>,
    ) -> Result<Response<ListTransfersResponse>, Status> {
        let (metadata, request) = (request.metadata().clone(), request.into_inner());
        let params = TransferParams {
            network: Some(request.network).filter(|n| !n.is_empty()),
            address: request.address,
            from_address: request.from_address,
            to_address: request.to_address,
            asset: request.asset,
            from: request.from,
            to: request.to,
            limit: request.limit,
            cursor: request.cursor,
        };
        self.read(&metadata, |queries| {
            let params = params.clone();
            async move { transfer_page(&queries, &params).await }
        })
        .await
    }

    type WatchPaymentsStream = EventStream;

    async fn watch_payments(
        &self,
        request: Request<WatchPaymentsRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let request = request.into_inner();
        let kinds = event_kinds(&request.kinds).map_err(status_of)?;
        let events = event_stream(&self.queries, request.since, request.network.as_deref(), kinds)
            .map_err(status_of)?
            .map(|view| Ok(PaymentEvent::from(view)));
        Ok(Response::new(Box::pin(events)))
    }

    async fn get_authorization(
        &self,
        request: Request<GetAuthorizationRequest>,
    ) -> Result<Response<Authorization>, Status> {
        let request = request.into_inner();
        let view = lookup_authorization(
            &self.queries,
            &request.network,
            &request.asset,
            &request.payer,
            &request.nonce,
        )
        .await
        .map_err(status_of)?;
        Ok(Response::new(view.into()))
    }

    async fn get_proof(&self, request: Request<GetProofRequest>) -> Result<Response<PaymentProof>, Status> {
        let (metadata, asked) = (request.metadata().clone(), request.into_inner());
        self.read(&metadata, |queries| {
            let asked = asked.clone();
            async move { payment_proof(&queries, &asked.network, &asked.payment, asked.index).await }
        })
        .await
    }

    async fn get_evidence(
        &self,
        request: Request<GetProofRequest>,
    ) -> Result<Response<TransactionEvidence>, Status> {
        let (metadata, asked) = (request.metadata().clone(), request.into_inner());
        self.read(&metadata, |queries| {
            let asked = asked.clone();
            async move { payment_evidence(&queries, &asked.network, &asked.payment, asked.index).await }
        })
        .await
    }
}
