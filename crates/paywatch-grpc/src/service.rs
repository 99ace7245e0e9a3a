//! The `paywatch.v1.Payments` service: each call parses its request into the query's
//! parameters and answers with `paywatch-query`, as the HTTP API does.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use paywatch_query::{
    ExpectedParams, ListParams, Queries, TransferParams, check_expectation, event_kinds, event_stream,
    list_page, lookup_authorization, lookup_payment, payment_evidence, payment_proof, transfer_page,
};
use tonic::{Request, Response, Status};

use crate::proto::payments_server::Payments;
use crate::proto::{
    Authorization, GetAuthorizationRequest, GetPaymentRequest, GetProofRequest, ListPaymentsRequest,
    ListPaymentsResponse, ListTransfersRequest, ListTransfersResponse, Payment, PaymentEvent, PaymentProof,
    TransactionEvidence, WatchPaymentsRequest,
};
use crate::status::status_of;

/// The service, over the queries both APIs serve.
#[derive(Clone)]
pub struct PaymentsService {
    queries: Queries,
}

impl PaymentsService {
    /// The service answering from `queries`.
    pub fn new(queries: Queries) -> Self {
        Self { queries }
    }
}

/// The stream `WatchPayments` answers.
type EventStream = Pin<Box<dyn Stream<Item = Result<PaymentEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Payments for PaymentsService {
    async fn get_payment(&self, request: Request<GetPaymentRequest>) -> Result<Response<Payment>, Status> {
        let request = request.into_inner();
        let mut view = lookup_payment(&self.queries, &request.network, &request.payment, request.index)
            .await
            .map_err(status_of)?;
        let expected = ExpectedParams {
            payer: request.expect_payer,
            pay_to: request.expect_pay_to,
            amount: request.expect_amount,
            asset: request.expect_asset,
        };
        view.expectation = check_expectation(&self.queries, &view, &expected).map_err(status_of)?;
        Ok(Response::new(view.into()))
    }

    async fn list_payments(
        &self,
        request: Request<ListPaymentsRequest>,
    ) -> Result<Response<ListPaymentsResponse>, Status> {
        let request = request.into_inner();
        let params = ListParams {
            network: Some(request.network).filter(|n| !n.is_empty()),
            payer: request.payer,
            pay_to: request.pay_to,
            asset: request.asset,
            memo: request.memo,
            facilitator: request.facilitator,
            state: request.state,
            method: request.method,
            from: request.from,
            to: request.to,
            limit: request.limit,
            cursor: request.cursor,
            group_by: None,
        };
        let page = list_page(&self.queries, &params).await.map_err(status_of)?;
        Ok(Response::new(page.into()))
    }

    async fn list_transfers(
        &self,
        request: Request<ListTransfersRequest>,
    ) -> Result<Response<ListTransfersResponse>, Status> {
        let request = request.into_inner();
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
        let page = transfer_page(&self.queries, &params).await.map_err(status_of)?;
        Ok(Response::new(page.into()))
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
        let request = request.into_inner();
        let view = payment_proof(&self.queries, &request.network, &request.payment, request.index)
            .await
            .map_err(status_of)?;
        Ok(Response::new(view.into()))
    }

    async fn get_evidence(
        &self,
        request: Request<GetProofRequest>,
    ) -> Result<Response<TransactionEvidence>, Status> {
        let request = request.into_inner();
        let view = payment_evidence(&self.queries, &request.network, &request.payment, request.index)
            .await
            .map_err(status_of)?;
        Ok(Response::new(view.into()))
    }
}
