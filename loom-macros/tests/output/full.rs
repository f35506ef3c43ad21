/// Reads one memory.
///
/// Second paragraph.
pub async fn memory_get(cx: &OpCx, input: MemoryGet) -> OpResult<MemoryGot> {
    todo()
}
#[doc(hidden)]
#[allow(non_upper_case_globals, clippy::all)]
const _: () = {
    const _: () = ::loom_core::__private::check_op_name("memory.get");
    fn __loom_op_shim<'a>(
        cx: &'a ::loom_core::__private::OpCx,
        args: ::loom_core::__private::Value,
    ) -> ::loom_core::__private::BoxFuture<
        'a,
        ::loom_core::__private::OpResult<::loom_core::__private::Output>,
    > {
        ::std::boxed::Box::pin(async move {
            let input: MemoryGet = ::loom_core::__private::decode(args)?;
            ::loom_core::__private::encode::<
                <OpResult<MemoryGot> as ::loom_core::__private::OpReturn>::Output,
            >(memory_get(cx, input).await)
        })
    }
    #[allow(dead_code)]
    fn __loom_op_send_check(cx: &::loom_core::__private::OpCx, input: MemoryGet) {
        ::loom_core::__private::assert_send(&memory_get(cx, input));
    }
    static __LOOM_OP_META: ::loom_core::__private::OpMeta = ::loom_core::__private::OpMeta {
        name: ::loom_core::__private::OpName::Explicit("memory.get"),
        handler: "memory_get",
        role: ::loom_core::role::viewer,
        idempotent: true,
        audit: true,
        writes: true,
        destructive: true,
        toolsets: &[::loom_core::toolset::assistant],
        maturity: ::loom_core::maturity::experimental,
        mcp: ::loom_core::__private::McpVisibility::Hidden {
            instead: "use loom_search",
        },
        budget_ms: ::core::option::Option::Some(250u32),
        rate: ::core::option::Option::Some(::loom_core::rate::heavy),
        run_scoped: false,
        tool: ::core::option::Option::Some("loom_memory_read"),
        doc: "Reads one memory.\n\nSecond paragraph.",
        input: ::loom_core::__private::input_info::<MemoryGet>(),
        output: ::loom_core::__private::output_info::<
            <OpResult<MemoryGot> as ::loom_core::__private::OpReturn>::Output,
        >(),
        call: __loom_op_shim,
        file: ::core::file!(),
        line: ::core::line!(),
    };
    ::loom_core::__private::inventory::submit! {
        ::loom_core::__private::OpEntry(& __LOOM_OP_META)
    }
};
