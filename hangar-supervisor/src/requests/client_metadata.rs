//! `Request::ClientMetadata`: the Client ID Metadata Document the API serves at
//! `/oauth/client.json` (public: it names only the hangar's public URL).

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::ClientMetadata`.
pub(crate) struct ClientMetadata;

impl Apply for ClientMetadata {
    async fn apply(self, hangar: &Hangar, _decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(Reply::ClientMetadata { document: hangar.client_document()? })
    }
}
