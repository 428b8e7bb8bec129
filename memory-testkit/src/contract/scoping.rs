//! Operation ids, namespaces, definitions, scopes and multi-key reads.

use super::*;

pub(super) async fn reused_operation_id_with_other_command_conflicts<S: Store>(
    store: &S,
) -> Checked {
    let key = main_key()?;
    let original_write = put(&key, "op-shared", None, "original", &["reader"])?;
    let original = apply_ok(store, original_write.clone(), "create")
        .await?
        .receipt;
    let other_key = MemoryKey {
        namespace: key.namespace.clone(),
        id: DocumentId::new("doc-2")?,
    };
    for (step, write) in [
        (
            "same key, other text",
            put(&key, "op-shared", None, "changed", &["reader"])?,
        ),
        (
            "same key, other scopes",
            put(&key, "op-shared", None, "original", &["other"])?,
        ),
        (
            "same key, an expected revision",
            put(
                &key,
                "op-shared",
                Some(&original.document.revision),
                "original",
                &["reader"],
            )?,
        ),
        (
            "other key",
            put(&other_key, "op-shared", None, "original", &["reader"])?,
        ),
        (
            "a withdrawal",
            withdraw(&key, "op-shared", &original.document.revision, "forget")?,
        ),
    ] {
        let error = apply_refused(store, write, ErrorKind::OperationConflict, step).await?;
        ensure!(
            matches!(&error, MemoryError::OperationConflict { operation_id } if operation_id.as_str() == "op-shared"),
            "{step}: the error does not name the reused operation id: {error:?}"
        );
    }
    let stored = read(store, &key).await?;
    ensure!(
        stored.as_ref() == Some(&original.document),
        "a conflicting reuse changed the document: {}",
        Brief(stored.as_ref())
    );
    let other = read(store, &other_key).await?;
    ensure!(
        other.is_none(),
        "a conflicting reuse created {}",
        Brief(other.as_ref())
    );
    expect_replay(
        store,
        original_write,
        &original,
        "retry of the original command",
    )
    .await
}

pub(super) async fn namespaces_are_independent<S: Store>(store: &S) -> Checked {
    let first_key = key(&namespace::<SuiteUsers>("tenant-a", "user-1")?, "doc-1")?;
    let second_key = key(&namespace::<SuiteUsers>("tenant-a", "user-2")?, "doc-1")?;
    ensure!(
        first_key.namespace != second_key.namespace,
        "two identities share an address"
    );
    let first_write = put(&first_key, "op-same", None, "first namespace", &["reader"])?;
    let second_write = put(
        &second_key,
        "op-same",
        None,
        "second namespace",
        &["reader"],
    )?;
    let first = apply_ok(store, first_write.clone(), "create in the first namespace").await?;
    let second = apply_ok(
        store,
        second_write.clone(),
        "same id and operation id in the second namespace",
    )
    .await?;
    ensure!(
        !second.replayed,
        "the second namespace's write was taken as a replay of the first's"
    );
    apply_ok(
        store,
        withdraw(
            &first_key,
            "op-withdraw",
            &first.receipt.document.revision,
            "forget",
        )?,
        "withdrawal in the first namespace",
    )
    .await?;
    let stored = read(store, &second_key).await?;
    ensure!(
        stored.as_ref() == Some(&second.receipt.document),
        "the first namespace's withdrawal reached the second: {}",
        Brief(stored.as_ref())
    );
    let edited = apply_ok(
        store,
        put(
            &second_key,
            "op-withdraw",
            Some(&second.receipt.document.revision),
            "edited",
            &["reader"],
        )?,
        "reuse of the first namespace's withdrawal operation id in the second",
    )
    .await?;
    ensure!(
        !edited.replayed,
        "an operation id of the first namespace was replayed in the second"
    );
    // Withdrawn in the first namespace: the retry answers its receipt without the words.
    expect_replay(
        store,
        first_write,
        &memory_core::revisions::redact(first.receipt.clone()),
        "retry in the first namespace",
    )
    .await?;
    Ok(())
}

pub(super) async fn definitions_never_collide<S: Store>(store: &S) -> Checked {
    let users = namespace::<SuiteUsers>("tenant-a", "user-1")?;
    let users_v2 = namespace::<SuiteUsersV2>("tenant-a", "user-1")?;
    let teams = namespace::<SuiteTeams>("tenant-a", "user-1")?;
    let addresses = [users.address(), users_v2.address(), teams.address()];
    for (index, address) in addresses.iter().enumerate() {
        ensure!(
            !addresses[index + 1..].contains(address),
            "two definitions share the address {address:?}"
        );
    }
    let keys = [
        key(&users, "doc-1")?,
        key(&users_v2, "doc-1")?,
        key(&teams, "doc-1")?,
    ];
    let mut written = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        let outcome = apply_ok(
            store,
            put(
                key,
                "op-same",
                None,
                &format!("definition {index}"),
                &["reader"],
            )?,
            "same identity, id and operation id under another definition",
        )
        .await?;
        ensure!(
            !outcome.replayed,
            "definition {index}'s write was taken as a replay"
        );
        written.push(outcome.receipt.document);
    }
    let stored = store.read_many(&keys).await?;
    ensure!(
        stored
            .iter()
            .zip(&written)
            .all(|(stored, written)| stored.as_ref() == Some(written)),
        "documents of different definitions overwrote each other"
    );
    Ok(())
}

pub(super) async fn empty_scope_list_grants_no_access<S: Store>(store: &S) -> Checked {
    let users = namespace::<SuiteUsers>("tenant-a", "user-1")?;
    let other = namespace::<SuiteUsers>("tenant-a", "user-2")?;
    let hidden_key = key(&users, "hidden")?;
    apply_ok(
        store,
        put(&hidden_key, "op-hidden", None, "no scopes", &[])?,
        "put with no scopes",
    )
    .await?;
    let Some(hidden) = read(store, &hidden_key).await? else {
        return Err(Failure(
            "a document with no scopes cannot be read by key".to_owned(),
        ));
    };
    ensure!(
        hidden.scopes.is_empty(),
        "the store granted scopes nobody asked for"
    );
    for scope in scopes(&["reader", "writer", "admin", "*"])? {
        ensure!(
            !hidden.is_visible_to(&users.access(scope.clone())),
            "a document with no scopes is visible to scope {}",
            scope.as_str()
        );
    }
    let shared_key = key(&users, "shared")?;
    let created = apply_ok(
        store,
        put(&shared_key, "op-shared", None, "reader only", &["reader"])?,
        "put",
    )
    .await?;
    let Some(shared) = read(store, &shared_key).await? else {
        return Err(Failure(
            "a scoped document cannot be read by key".to_owned(),
        ));
    };
    let reader = scopes(&["reader"])?.remove(0);
    let writer = scopes(&["writer"])?.remove(0);
    ensure!(
        shared.is_visible_to(&users.access(reader.clone())),
        "a listed scope cannot see its document"
    );
    ensure!(
        !shared.is_visible_to(&users.access(writer)),
        "an unlisted scope sees the document"
    );
    ensure!(
        !shared.is_visible_to(&other.access(reader.clone())),
        "the scope of another namespace sees the document"
    );
    let withdrawn = apply_ok(
        store,
        withdraw(
            &shared_key,
            "op-withdraw",
            &created.receipt.document.revision,
            "forget",
        )?,
        "withdrawal",
    )
    .await?;
    ensure!(
        !withdrawn
            .receipt
            .document
            .is_visible_to(&users.access(reader)),
        "a withdrawn document is visible to its former scope"
    );
    Ok(())
}

pub(super) async fn read_many_keeps_order<S: Store>(store: &S) -> Checked {
    let users = namespace::<SuiteUsers>("tenant-a", "user-1")?;
    let [first, second, missing] = [
        key(&users, "first")?,
        key(&users, "second")?,
        key(&users, "missing")?,
    ];
    let first_document = apply_ok(
        store,
        put(&first, "op-1", None, "one", &["reader"])?,
        "put first",
    )
    .await?
    .receipt
    .document;
    let second_revision = apply_ok(
        store,
        put(&second, "op-2", None, "two", &["reader"])?,
        "put second",
    )
    .await?
    .receipt
    .document
    .revision;
    apply_ok(
        store,
        withdraw(&second, "op-3", &second_revision, "forget")?,
        "withdraw second",
    )
    .await?;
    let answer = store
        .read_many(&[missing.clone(), first.clone(), second, first])
        .await?;
    ensure!(
        answer
            == vec![
                None,
                Some(first_document.clone()),
                None,
                Some(first_document)
            ],
        "read_many answered {:?} for [missing, first, withdrawn, first]",
        answer
            .iter()
            .map(|document| document.is_some())
            .collect::<Vec<_>>()
    );
    ensure!(
        store.read_many(&[]).await?.is_empty(),
        "read_many of no keys returned documents"
    );
    Ok(())
}

pub(super) async fn refused_input_stores_nothing<S: Store>(store: &S) -> Checked {
    let key = main_key()?;
    let duplicate_scopes = put(&key, "op-1", None, "text", &["reader", "reader"])?;
    apply_refused(
        store,
        duplicate_scopes,
        ErrorKind::InvalidInput,
        "put listing a scope twice",
    )
    .await?;
    let mut long_locator = put(&key, "op-1", None, "text", &["reader"])?;
    if let MemoryWrite::Put { locator, .. } = &mut long_locator {
        *locator = "l".repeat(MAX_LOCATOR_BYTES + 1);
    }
    let error = apply_refused(
        store,
        long_locator,
        ErrorKind::TooLarge,
        "put with an oversized locator",
    )
    .await?;
    ensure!(
        matches!(&error, MemoryError::TooLarge { limit, .. } if limit.contains("locator")),
        "the error does not name the locator limit: {error}"
    );
    let stored = read(store, &key).await?;
    ensure!(
        stored.is_none(),
        "refused input stored {}",
        Brief(stored.as_ref())
    );
    let outcome = apply_ok(
        store,
        put(&key, "op-1", None, "text", &["reader"])?,
        "valid put with the same operation id",
    )
    .await?;
    ensure!(!outcome.replayed, "refused input left a receipt behind");
    Ok(())
}
