async fn capabilities(cx: &OpCx, input: Empty) -> OpResult<Caps> {
    todo()
}
#[doc(hidden)]
#[allow(non_upper_case_globals, clippy::all)]
const _: () = {
    const _: () = ::loom_core::__private::check_derived_name(
        ::core::module_path!(),
        "capabilities",
    );
    fn __loom_op_shim<'a>(
        cx: &'a ::loom_core::__private::OpCx,
        args: ::loom_core::__private::Value,
    ) -> ::loom_core::__private::BoxFuture<
        'a,
        ::loom_core::__private::OpResult<::loom_core::__private::Output>,
    > {
        ::std::boxed::Box::pin(async move {
            let input: Empty = ::loom_core::__private::decode(args)?;
            ::loom_core::__private::encode::<
                <OpResult<Caps> as ::loom_core::__private::OpReturn>::Output,
            >(capabilities(cx, input).await)
        })
    }
    #[allow(dead_code)]
    fn __loom_op_send_check(cx: &::loom_core::__private::OpCx, input: Empty) {
        ::loom_core::__private::assert_send(&capabilities(cx, input));
    }
    static __LOOM_OP_META: ::loom_core::__private::OpMeta = ::loom_core::__private::OpMeta {
        name: ::loom_core::__private::OpName::Derived {
            module_path: ::core::module_path!(),
            handler: "capabilities",
        },
        handler: "capabilities",
        role: ::loom_core::role::viewer,
        idempotent: true,
        audit: false,
        writes: false,
        destructive: false,
        toolsets: &[],
        maturity: ::loom_core::maturity::stable,
        mcp: ::loom_core::__private::McpVisibility::Callable,
        budget_ms: ::core::option::Option::None,
        rate: ::core::option::Option::None,
        run_scoped: true,
        tool: ::core::option::Option::None,
        doc: "",
        input: ::loom_core::__private::input_info::<Empty>(),
        output: ::loom_core::__private::output_info::<
            <OpResult<Caps> as ::loom_core::__private::OpReturn>::Output,
        >(),
        call: __loom_op_shim,
        file: ::core::file!(),
        line: ::core::line!(),
    };
    ::loom_core::__private::inventory::submit! {
        ::loom_core::__private::OpEntry(& __LOOM_OP_META)
    }
};
