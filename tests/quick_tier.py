"""The quick tier, ``pytest -m quick -n 2``: the fast unit tests of every module, about
3 minutes on two CPU cores, for a developer between two edits. ``pytest -n 2`` runs
everything before a commit (docs/testing.md).

A test is quick unless it is marked ``slow`` (a training run through the command
line) or ``real_data`` (it reads ``$LNORM_DATA_DIR``), or it is listed in SLOW: a
case that took over SECONDS on one CPU core (a model compiled at the papers' sizes, a
scan over long sequences, an ``lnorm`` subprocess), except that a function whose every
case does keeps its cheapest one, up to 3 times SECONDS, so that every function's
code is run. A new test is quick by default; one that takes longer goes in SLOW.
``@pytest.mark.quick`` on a test adds it whatever this file says.
"""

from __future__ import annotations

#: A case that takes longer than this on one core (setup, call and teardown,
#: single-threaded XLA, the shared machine under load) is left out of the quick tier.
SECONDS = 1.0

#: The tests left out: ``file::function`` (every case) or ``file::function[case]``,
#: with the seconds one case took on one core of the shared machine under load
#: (about twice an idle core's), measured with ``--durations``.
SLOW: frozenset[str] = frozenset({
    # Every case of these functions:
    "test_attentive_reader.py::test_attention_is_zero_on_padding_and_padding_changes_nothing",  # 3.6 s
    "test_attentive_reader.py::test_bucketed_evaluation_equals_evaluation_at_full_width",  # 11.7 s
    "test_attentive_reader.py::test_training_renames_entities_consistently",  # 3.0 s
    "test_attentive_reader_options.py::test_authors_initialisation",  # 5.8 s
    "test_attentive_reader_options.py::test_embedding_dropout_reaches_the_logits",  # 3.0 s
    "test_bench_json.py::test_bench_rnn_json_holds_the_printed_rows_and_ratios",  # 11.6 s
    "test_bench_json.py::test_bench_seeds_json_holds_the_printed_rows_and_ratios",  # 50.7 s
    "test_bln_models.py::test_authors_dropout_is_in_both_lstms_and_only_in_training",  # 10.0 s
    "test_bln_models.py::test_sentiment_rnn_is_finite_at_batch_size_one_with_padding",  # 16.5 s
    "test_bln_models.py::test_unmasked_padding_runs_through_the_lstms_and_norms",  # 5.1 s
    "test_bln_search.py::test_cifar_smoke_batch_size_1",  # 10.9 s
    "test_bln_search.py::test_grouped_evaluation_equals_separate_batches",  # 5.0 s
    "test_bln_search.py::test_imdb_smoke_batch_size_25",  # 11.3 s
    "test_bln_search.py::test_search_rows_are_finite_and_the_selection_is_the_validation_optimum",  # 13.1 s
    "test_bln_search.py::test_the_default_inference_agrees_with_the_runs_own_evaluation_mid_epoch",  # 6.8 s
    "test_checkpoint.py::test_a_record_written_on_a_full_disk_is_one_line",  # 3.2 s
    "test_data_cbt.py::test_cbt_books_on_the_gutenberg_corpus",  # 3.8 s
    "test_data_cloze.py::test_cloze_books_on_the_gutenberg_corpus",  # 3.7 s
    "test_data_real.py::test_cifar10_jpeg_zip",  # 17.9 s
    "test_data_real.py::test_iamondb_names_the_lines_the_database_leaves_untranscribed",  # 26.7 s
    "test_data_real.py::test_imdb",  # 11.1 s
    "test_draw.py::test_smoke_train_pictures_and_resume",  # 21.9 s
    "test_draw.py::test_untrained_bound_is_784_ln2_plus_kl",  # 8.3 s
    "test_evaluate_command.py::test_protocol_and_task_names_through_the_cli",  # 12.8 s
    "test_evaluate_command.py::test_rerunning_evaluate_replaces_its_record",  # 9.7 s
    # 64 smoke runs, 3 to 61 s each (25 min in all, load 3), run only with
    # LNORM_GOLDEN_ALL=1; each experiment's headline norm stays quick
    # (test_first_updates_of_the_headline_norm, 4 to 48 s).
    "test_golden_losses.py::test_first_updates_of_every_other_norm",
    "test_handwriting.py::test_forward_and_loss_match_numpy",  # 3.6 s
    "test_handwriting.py::test_generator_steps_the_trained_network_and_stops_past_the_text",  # 8.0 s
    "test_handwriting.py::test_padding_changes_nothing",  # 10.2 s
    "test_handwriting.py::test_untrained_window_advances_at_its_initial_step",  # 3.4 s
    "test_linear_models.py::test_penalised_intercept_and_one_vs_rest_are_liblinears",  # 3.4 s
    "test_mdn.py::test_log_likelihood_matches_numpy_with_correlation",  # 6.6 s
    "test_mdn.py::test_near_degenerate_covariance_is_finite_and_exact",  # 12.5 s
    "test_metrics_writer.py::test_a_real_wandb_with_a_key_and_no_answer_from_its_server_logs_offline",  # 8.1 s
    "test_normalization.py::test_bln_inference_all_16_configurations",  # 4.1 s
    "test_normalization.py::test_bln_population_feature_statistics_per_position_not_per_slot",  # 3.5 s
    "test_normalization.py::test_bln_training_mask_excludes_padded_positions",  # 5.9 s
    "test_normalization.py::test_bln_training_matches_equations",  # 3.1 s
    "test_normalization.py::test_weight_norm_dense_data_dependent_init",  # 3.9 s
    "test_optim.py::test_adam_theano_steps_are_larger_than_adams_early_and_equal_later",  # 6.0 s
    "test_order_embeddings.py::test_forward_matches_numpy",  # 8.7 s
    "test_order_embeddings.py::test_padding_changes_nothing",  # 3.5 s
    "test_order_embeddings.py::test_training_embeds_one_random_caption_per_image",  # 11.6 s
    "test_parallel.py::test_four_devices_match_one_device",  # 34.2 s
    "test_parallel.py::test_kill_and_resume_on_four_devices",  # 17.2 s
    "test_parallel.py::test_two_process_job_matches_one_device",  # 51.6 s
    "test_plot_report.py::test_invariance_command",  # 6.0 s
    "test_plot_report.py::test_paper_figure_by_name",  # 4.0 s
    "test_plot_report.py::test_plot_and_compare_print_those_labels",  # 3.2 s
    "test_prms_and_fused_gru_sizes.py::test_fused_gru_with_dropout_mask_and_padding_against_a_plain_loop",  # 9.6 s
    "test_reader_ln_dynamics.py::test_trace_of_the_smoke_reader_replays_lnorm_train",  # 34.2 s
    "test_rms_experiments.py::test_config_options_reach_the_rms_cells",  # 7.7 s
    "test_rms_experiments.py::test_skip_thoughts_with_rms_grus_matches_the_equations",  # 16.0 s
    "test_rnn_dropout.py::test_input_mask_is_constant_over_time_in_the_gradient",  # 9.5 s
    "test_rnn_dropout.py::test_mask_statistics",  # 5.4 s
    "test_rnn_dropout.py::test_masks_are_inverted_dropout_per_sequence_and_per_rng",  # 3.7 s
    "test_rnn_fused_gru.py::test_fused_gru_equals_scan_in_values_and_gradients",  # 5.2 s
    # The Pallas kernels, interpreted: 7 to 14 s a case (compilation, 50 steps).
    "test_rnn_gpu.py::test_blocks_of_rows_that_overhang_the_batch",  # 11.9 s
    "test_rnn_gpu.py::test_gru_kernels_equal_the_scan",  # 7.0 s
    "test_rnn_gpu.py::test_lnorm_check_lowers_a_recurrent_config_with_the_kernels_for_cuda",  # 4.7 s
    "test_rnn_gpu.py::test_lstm_kernels_equal_the_scan",  # 7.4 s
    "test_rnn_gpu.py::test_outputs_past_a_sequence_hold_its_last_state_and_pass_their_gradients",  # 16.3 s
    "test_rnn_gpu.py::test_the_loop_runs_to_the_longest_sequence_both_ways",  # 4.3 s
    "test_rnn_gpu.py::test_unpadded_sequences_from_a_zero_state",  # 10.3 s
    "test_rnn_sequence.py::test_dropout_between_layers_only_in_training",  # 25.7 s
    "test_rnn_sequence.py::test_padding_invariance",  # 18.7 s
    "test_rnn_sequence.py::test_reverse_and_bidirectional_match_reference_on_flipped_sequences",  # 11.3 s
    "test_rnn_sequence.py::test_sequence_mask_and_masked_mean",  # 7.7 s
    "test_rnn_sequence.py::test_stacked_layers_with_learned_initial_state",  # 9.5 s
    "test_seeds_together.py::test_a_seed_that_diverges_stops_alone_and_the_others_train_on",  # 27.1 s
    "test_seeds_together.py::test_a_seed_workdir_resumes_by_either_command",  # 13.2 s
    "test_seeds_together.py::test_one_seed_through_the_stacked_path_differs_from_its_run_alone_in_rounding",  # 38.0 s
    "test_sentence_eval_protocols.py::test_a_fit_stopped_short_is_reported",  # 31.5 s
    "test_sentence_eval_protocols.py::test_evaluate_encoder_appends_eos_and_normalises_as_each_protocol_does",  # 66.6 s
    "test_sentence_eval_protocols.py::test_kiros_nested_cross_validation_is_their_scripts_with_scikit_learn",  # 8.7 s
    "test_sentence_eval_protocols.py::test_kiros_relatedness_trains_and_ends",  # 4.5 s
    "test_sentence_eval_protocols.py::test_senteval_nested_cross_validation_is_scikit_learns",  # 11.3 s
    "test_sentence_eval_protocols.py::test_softmax_mse_rounds_are_senteval_s_training_by_hand",  # 5.3 s
    "test_sentence_eval_protocols.py::test_trec_in_both_protocols_is_scikit_learns",  # 14.6 s
    "test_sentence_eval_protocols.py::test_trec_searches_senteval_s_kfold_grid",  # 62.4 s
    "test_senteval.py::test_classifier_protocols_on_separable_and_random_features",  # 32.5 s
    "test_senteval.py::test_evaluate_encoder_on_fixture_files_with_a_perfect_encoder",  # 11.1 s
    "test_senteval.py::test_kiros_tokenizer_by_hand",  # 5.4 s
    "test_senteval.py::test_relatedness_recovers_a_linear_score_and_not_noise",  # 6.3 s
    "test_senteval.py::test_senteval_rows_of_the_public_files_are_senteval_s",  # 4.6 s
    "test_short_runs.py::test_every_call_compiled_and_the_run_still_has_a_training_time",  # 27.8 s
    "test_skip_thoughts.py::test_encode_sentences_keeps_order_and_ignores_batch_padding",  # 5.6 s
    "test_skip_thoughts.py::test_forward_matches_reference",  # 8.9 s
    "test_skip_thoughts.py::test_loss_is_the_summed_cross_entropy_of_real_targets",  # 3.1 s
    "test_skip_thoughts.py::test_padding_changes_nothing",  # 14.4 s
    "test_skip_thoughts.py::test_word_embedding_starts_symmetric_about_zero",  # 15.0 s
    "test_skip_thoughts_eos.py::test_the_encoder_reads_eos_only_when_asked",  # 7.6 s
    "test_successor_norms.py::test_cell_options_reach_the_step_modules",  # 14.8 s
    "test_successor_norms.py::test_config_options_reach_the_cells",  # 4.7 s
    "test_sweep.py::test_ad_hoc_grid_runs_selects_and_skips",  # 22.4 s
    "test_sweep.py::test_two_member_sweep_runs_resumes_and_skips",  # 65.3 s
    "test_throughput.py::test_measure_train_step_reports_the_ratio_it_defines",  # 11.0 s
    "test_train_cli.py::test_a_rerun_after_a_kill_before_the_first_checkpoint_says_it_starts_over",  # 19.5 s
    "test_train_cli.py::test_a_tfds_run_refuses_the_embedded_digits",  # 3.0 s
    "test_train_cli.py::test_ctrl_c_is_a_calm_stop_with_exit_code_130",  # 5.6 s
    "test_train_cli.py::test_divergence_stops_with_the_step",  # 5.8 s
    "test_train_cli.py::test_evaluations_off_the_asked_steps_are_announced_and_fall_where_announced",  # 9.1 s
    "test_train_cli.py::test_geometric_evaluations_carry_the_gradient_record_and_resume_exactly",  # 7.3 s
    "test_train_cli.py::test_mid_epoch_evaluation_leaves_training_unchanged",  # 10.6 s
    "test_train_cli.py::test_one_epoch_smoke_run",  # 14.5 s
    "test_train_cli.py::test_progress_in_a_log_follows_max_steps_without_carriage_returns",  # 9.9 s
    "test_train_cli.py::test_resume_after_kill_equals_uninterrupted_run",  # 28.6 s
    "test_train_cli.py::test_workdir_of_another_config_is_refused",  # 3.9 s
    "test_train_loop_parts.py::test_indicators_agree_with_the_optimizer_itself",  # 3.9 s
    "test_user_norms.py::test_a_normalizer_that_divides_by_zero_in_an_lstm_is_named_as_the_cause",  # 24.8 s
    "test_user_norms.py::test_in_the_cells_it_takes_every_place_of_ln",  # 5.5 s
    "test_wandb_sweep.py::test_the_agent_command_trains_into_a_workdir_per_run_as_the_agents_run",  # 24.4 s
    "test_workdir_lock.py::test_second_train_on_a_busy_workdir_stops_and_a_killed_holder_blocks_nothing",  # 15.0 s
    # These cases (a cheaper case of the same function stays quick):
    "test_attentive_reader.py::test_forward_and_loss_match_reference[ln-True]",  # 2.4 s
    "test_attentive_reader.py::test_forward_and_loss_match_reference[none-False]",  # 4.0 s
    "test_draw.py::test_filterbank_matches_numpy[1]",  # 1.9 s
    "test_draw.py::test_filterbank_matches_numpy[2]",  # 1.3 s
    "test_forward_models.py::test_bln_imdb_sentiment_rnn_forward[bln]",  # 1.2 s
    "test_forward_models.py::test_draw_forward[ln-True]",  # 2.2 s
    "test_forward_models.py::test_draw_forward[ln_cell-True]",  # 1.5 s
    "test_handwriting.py::test_graves_clipping_bounds_every_output_and_lstm_gradient[none]",  # 1.8 s
    "test_initializers.py::test_per_gate_blocks_are_orthogonal[make_lstm_cell-4]",  # 2.6 s
    "test_lowering.py::test_normalizers_with_their_own_state_or_init_lower[attentive_reader-bn]",  # 1.7 s
    "test_lowering.py::test_train_and_eval_steps_lower_for_cuda_and_tpu[attentive_reader]",  # 1.4 s
    "test_lowering.py::test_train_and_eval_steps_lower_for_cuda_and_tpu[bln_imdb]",  # 2.0 s
    "test_lowering.py::test_train_and_eval_steps_lower_for_cuda_and_tpu[draw]",  # 1.9 s
    "test_lowering.py::test_train_and_eval_steps_lower_for_cuda_and_tpu[handwriting]",  # 1.7 s
    "test_mdn.py::test_log_density_matches_float64_near_unit_correlation[0.5-0.3-0.9999]",  # 2.5 s
    "test_mdn.py::test_sampler_matches_moments[0.0]",  # 7.0 s
    "test_normalization.py::test_batch_norm_training_and_population_statistics[False]",  # 2.1 s
    "test_normalization.py::test_bfloat16_input_uses_float32_statistics[bln]",  # 2.6 s
    "test_normalization.py::test_bfloat16_input_uses_float32_statistics[bn]",  # 1.3 s
    "test_normalization.py::test_bfloat16_input_uses_float32_statistics[ln]",  # 1.6 s
    "test_normalization.py::test_bln_batch_size_one_is_finite[epoch_mean]",  # 3.1 s
    "test_normalization.py::test_fused_layer_norm_matches_autodiff[shape0-float32-False]",  # 9.0 s
    "test_normalization.py::test_fused_layer_norm_matches_autodiff[shape1-float32-True]",  # 3.7 s
    "test_normalization.py::test_fused_layer_norm_matches_autodiff[shape2-float32-True]",  # 3.8 s
    "test_normalization.py::test_fused_rms_norm_matches_autodiff[shape1-float32-False-0.0625-False]",  # 1.1 s
    "test_normalization.py::test_fused_rms_norm_matches_autodiff[shape3-float32-True-0.25-True]",  # 1.9 s
    "test_order_embeddings.py::test_contrastive_loss_matches_numpy[order]",  # 1.2 s
    "test_prms_and_fused_gru_sizes.py::test_prms_values_and_gradients_at_odd_widths_against_numpy[24-0.0625]",  # 1.0 s
    "test_prms_and_fused_gru_sizes.py::test_prms_values_and_gradients_at_odd_widths_against_numpy[7-0.5]",  # 1.1 s
    "test_reader_ln_dynamics.py::test_lstm_saturation_against_the_reference_gates[none-4.0]",  # 6.8 s
    "test_retrieval.py::test_blockwise_ranks_equal_brute_force_on_random_data[blocks1]",  # 3.5 s
    "test_retrieval.py::test_blockwise_ranks_equal_brute_force_on_random_data[blocks2]",  # 2.9 s
    "test_retrieval.py::test_blockwise_ranks_equal_brute_force_on_random_data[blocks3]",  # 3.7 s
    "test_retrieval.py::test_embeddings_padding_and_per_image_means[order]",  # 6.9 s
    "test_rms_experiments.py::test_perm_mnist_mlp_with_rms_matches_the_equations[rms]",  # 1.2 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-dyt]",  # 4.0 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-ln]",  # 6.3 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-ln_simple]",  # 2.3 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-none]",  # 10.5 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-prms]",  # 3.5 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-rms]",  # 2.3 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-scalenorm]",  # 3.0 s
    "test_rnn_cells.py::test_forward_matches_reference[False-gru-wn]",  # 4.0 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-bn]",  # 14.3 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-dyt]",  # 5.0 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-dyt_cell]",  # 1.8 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-ln]",  # 9.0 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-ln_cell]",  # 3.6 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-ln_simple]",  # 3.1 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-ln_simple_cell]",  # 2.7 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-none]",  # 15.6 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-prms]",  # 4.2 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-prms_cell]",  # 2.7 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-rms]",  # 4.2 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-rms_cell]",  # 3.2 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-scalenorm]",  # 3.6 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-scalenorm_cell]",  # 2.5 s
    "test_rnn_cells.py::test_forward_matches_reference[False-lstm-wn]",  # 4.4 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-ln]",  # 1.4 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-ln_simple]",  # 1.4 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-prms]",  # 1.3 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-rms]",  # 1.3 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-scalenorm]",  # 1.2 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-bn]",  # 2.2 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-dyt]",  # 1.1 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-dyt_cell]",  # 1.0 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-ln]",  # 2.2 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-ln_cell]",  # 1.5 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-ln_simple]",  # 1.9 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-ln_simple_cell]",  # 1.5 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-none]",  # 1.2 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-prms]",  # 1.8 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-prms_cell]",  # 1.7 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-rms]",  # 1.8 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-rms_cell]",  # 1.5 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-scalenorm]",  # 1.8 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-scalenorm_cell]",  # 1.4 s
    "test_rnn_cells.py::test_forward_matches_reference[True-lstm-wn]",  # 1.2 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-bn]",  # 19.2 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-dyt]",  # 6.6 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-dyt_cell]",  # 3.7 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-ln]",  # 10.1 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-ln_cell]",  # 3.3 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-none]",  # 10.6 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-prms]",  # 5.9 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-prms_cell]",  # 3.8 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-rms]",  # 4.2 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-rms_cell]",  # 3.2 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-scalenorm]",  # 5.4 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-scalenorm_cell]",  # 2.9 s
    "test_rnn_cells.py::test_gradients_match_reference[lstm-wn]",  # 6.8 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-bn]",  # 9.3 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-dyt]",  # 5.5 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-dyt_cell]",  # 4.0 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-ln]",  # 8.3 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-ln_cell]",  # 6.3 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-ln_simple]",  # 8.0 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-ln_simple_cell]",  # 6.0 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-none]",  # 4.7 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-prms]",  # 7.7 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-prms_cell]",  # 6.5 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-rms]",  # 8.4 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-rms_cell]",  # 6.2 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-scalenorm]",  # 7.2 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-scalenorm_cell]",  # 5.8 s
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[lstm-wn]",  # 4.8 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-dyt]",  # 4.6 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-ln]",  # 6.4 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-ln_simple]",  # 2.6 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-none]",  # 11.0 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-prms]",  # 2.7 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-rms]",  # 2.3 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-scalenorm]",  # 3.2 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[gru-wn]",  # 5.0 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-bn]",  # 14.8 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-dyt]",  # 5.0 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-ln]",  # 8.8 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-ln_cell]",  # 3.0 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-ln_simple]",  # 3.3 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-ln_simple_cell]",  # 2.4 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-none]",  # 15.0 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-prms]",  # 2.4 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-prms_cell]",  # 2.5 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-rms]",  # 4.1 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-rms_cell]",  # 3.0 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-scalenorm]",  # 3.7 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-scalenorm_cell]",  # 2.4 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-wn]",  # 5.4 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-ln]",  # 14.8 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-ln_cell]",  # 7.6 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-ln_simple]",  # 9.0 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-ln_simple_cell]",  # 6.7 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-none]",  # 23.2 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-prms]",  # 16.5 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-prms_cell]",  # 6.2 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-rms]",  # 8.9 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-rms_cell]",  # 6.8 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-scalenorm]",  # 12.9 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-scalenorm_cell]",  # 6.3 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[False-wn]",  # 13.8 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-ln]",  # 10.9 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-ln_cell]",  # 8.4 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-ln_simple]",  # 12.4 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-none]",  # 6.5 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-prms]",  # 9.7 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-prms_cell]",  # 7.3 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-rms]",  # 9.5 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-rms_cell]",  # 6.9 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-scalenorm]",  # 10.2 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-scalenorm_cell]",  # 8.1 s
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-wn]",  # 6.9 s
    "test_successor_norms.py::test_bfloat16_input_computes_in_float32[dyt]",  # 1.2 s
    "test_successor_norms.py::test_perm_mnist_mlp_matches_the_equations[ln_simple]",  # 1.1 s
    "test_user_norms.py::test_the_check_tells_the_registered_per_example_normalizers_from_the_batch_ones[bln]",  # 2.9 s
    # Over 2 s in a run of the quick tier itself (two workers, the machine at load 5):
    "test_attentive_reader.py::test_forward_and_loss_match_reference[ln-False]",  # 9.1 s
    "test_attentive_reader_options.py::test_authors_input_blocks_are_glorot_when_not_square",  # 8.6 s
    "test_attentive_reader_options.py::test_embedding_dropout_zeroes_or_doubles_each_entry",  # 5.0 s
    "test_attentive_reader_options.py::test_lnorm_initialisation_restores_the_earlier_choice",  # 6.3 s
    "test_attentive_reader_options.py::test_training_renames_only_the_entity_outputs_of_the_vocabulary",  # 8.3 s
    "test_attentive_reader_options.py::test_vocabulary_softmax_with_the_unrestricted_argmax",  # 4.6 s
    "test_bench_json.py::test_bench_norms_json_holds_the_printed_rows_and_ratios",  # 4.8 s
    "test_checkpoint.py::test_lnorm_train_on_a_full_disk_stops_before_training_with_one_line",  # 5.1 s
    "test_evaluate_command.py::test_without_a_data_directory_one_message_names_the_flag_that_works",  # 5.5 s
    "test_flops.py::test_lnorm_flops_prints_the_count_the_time_and_the_share",  # 6.2 s
    "test_flops.py::test_lnorm_flops_writes_a_timing_record_by_the_stopping_rule",  # 6.7 s
    "test_forward_models.py::test_bln_cifar_lenet_forward[bln-authors]",  # 2.0 s
    "test_forward_models.py::test_bln_imdb_sentiment_rnn_forward[bn]",  # 2.0 s
    "test_handwriting.py::test_graves_clipping_bounds_every_output_and_lstm_gradient[ln]",  # 4.2 s
    "test_initializers.py::test_one_orthogonal_matrix_leaves_blocks_contracting[make_lstm_cell-4]",  # 2.5 s
    "test_initializers.py::test_per_gate_blocks_are_orthogonal[make_gru_cell-3]",  # 5.1 s
    "test_invariance.py::test_a_users_normalizer_gets_a_measured_row",  # 4.4 s
    "test_invariance.py::test_run_reports_and_fails_on_a_mismatch",  # 6.8 s
    "test_invariance.py::test_successor_rows_follow_from_their_equations[dyt]",  # 3.1 s
    "test_linear_models.py::test_binary_fits_are_scikit_learns_for_every_subset_and_c",  # 8.9 s
    "test_linear_models.py::test_multinomial_fits_are_scikit_learns",  # 43.2 s
    "test_linear_models.py::test_soft_targets_equal_rows_repeated_per_class_with_their_probability_as_weight",  # 9.4 s
    "test_losses.py::test_evaluation_mean_over_batches_with_a_remainder",  # 6.7 s
    "test_lowering.py::test_normalizers_with_their_own_state_or_init_lower[draw-wn]",  # 2.8 s
    "test_lowering.py::test_the_vocabulary_is_the_configs_cap_where_the_synthetic_data_has_fewer_words",  # 6.2 s
    "test_lowering.py::test_train_and_eval_steps_lower_for_cuda_and_tpu[bln_cifar]",  # 6.6 s
    "test_lowering.py::test_train_and_eval_steps_lower_for_cuda_and_tpu[order_embeddings]",  # 4.8 s
    "test_lowering.py::test_train_and_eval_steps_lower_for_cuda_and_tpu[skip_thoughts]",  # 4.5 s
    "test_mdn.py::test_log_density_matches_float64_near_unit_correlation[0.5-0.3--0.9999]",  # 5.4 s
    "test_mdn.py::test_sampler_matches_moments[1.0]",  # 7.8 s
    "test_normalization.py::test_bln_batch_size_one_is_finite[moving_average]",  # 5.1 s
    "test_normalization.py::test_bln_fully_masked_position_stays_finite",  # 10.2 s
    "test_normalization.py::test_bln_population_is_last_epoch_average",  # 7.1 s
    "test_normalization.py::test_fused_layer_norm_matches_autodiff[shape3-bfloat16-True]",  # 13.3 s
    "test_normalization.py::test_fused_rms_norm_matches_autodiff[shape0-float32-False-1.0-True]",  # 7.7 s
    "test_order_embeddings.py::test_task_fold_evaluation_equals_library_evaluation",  # 7.2 s
    "test_order_embeddings.py::test_training_loss_is_summed_or_averaged_over_the_batch",  # 4.5 s
    "test_retrieval.py::test_embeddings_padding_and_per_image_means[cosine]",  # 10.1 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-dyt]",  # 7.7 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-none]",  # 10.3 s
    "test_rnn_cells.py::test_forward_matches_reference[True-gru-wn]",  # 4.2 s
    "test_rnn_cells.py::test_parameter_count[gru-ln]",  # 5.8 s
    "test_rnn_cells.py::test_parameter_count[gru-scalenorm]",  # 2.1 s
    "test_rnn_cells.py::test_parameter_count[lstm-bn]",  # 9.9 s
    "test_rnn_cells.py::test_parameter_count[lstm-dyt]",  # 3.9 s
    "test_rnn_cells.py::test_parameter_count[lstm-ln]",  # 7.2 s
    "test_rnn_cells.py::test_parameter_count[lstm-none]",  # 13.1 s
    "test_rnn_cells.py::test_parameter_count[lstm-prms]",  # 3.4 s
    "test_rnn_cells.py::test_parameter_count[lstm-rms]",  # 2.2 s
    "test_rnn_cells.py::test_parameter_count[lstm-scalenorm]",  # 3.1 s
    "test_rnn_cells.py::test_parameter_count[lstm-wn]",  # 4.5 s
    "test_rnn_dropout.py::test_the_same_masks_serve_every_step[lstm-dyt_cell]",  # 4.8 s
    "test_sentence_eval_protocols.py::test_kiros_features_are_l2_normalised",  # 8.9 s
    "test_short_runs.py::test_a_plain_train_leaves_its_log_in_the_workdir",  # 23.8 s
    "test_train_cli.py::test_a_rerun_that_finds_other_data_is_refused_until_pinned",  # 11.1 s
    # Over 4 s in a second run of the quick tier (the same machine, load 5):
    "test_attentive_reader_options.py::test_identical_blocks_reproduce_the_authors_reseeding",
    "test_short_runs.py::test_every_call_compiled_and_the_run_still_has_a_training_time",
    "test_short_runs.py::test_a_plain_train_leaves_its_log_in_the_workdir",
    "test_short_runs.py::test_a_run_cut_by_max_steps_does_not_say_end_of_epoch",
    "test_short_runs.py::test_a_rerun_of_the_same_config_loads_its_programs_from_the_cache",
    "test_rnn_cells.py::test_parameter_count[lstm-ln_cell]",
    "test_rnn_cells.py::test_parameter_count[gru-none]",
    "test_rnn_cells.py::test_parameter_count[gru-rms]",
    "test_rnn_cells.py::test_parameter_count[gru-dyt]",
    "test_rnn_cells.py::test_parameter_count[lstm-ln_simple]",
    "test_linear_models.py::test_a_class_without_mass_is_left_out_as_scikit_learn_never_sees_it",
    "test_normalization.py::test_fused_rms_norm_matches_autodiff[shape2-float32-True-1.0-False]",
    "test_initializers.py::test_one_orthogonal_matrix_leaves_blocks_contracting[make_gru_cell-3]",
    "test_lowering.py::test_cpu_platform_compiles_and_reports_temporary_memory",
    "test_normalization.py::test_rms_norm_gradient_matches_central_differences",
    "test_draw.py::test_parameter_count_of_the_paper_model",
    "test_plot_layout.py::test_plot_names_its_file_by_what_it_drew",
    # Cases not reached in 240 s on one core (the others of their files were slow):
    "test_rnn_cells.py::test_gradients_match_reference[lstm-ln_simple]",
    "test_rnn_cells.py::test_gradients_match_reference[lstm-ln_simple_cell]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-none]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-ln]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-wn]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-rms]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-prms]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-dyt]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-scalenorm]",
    "test_rnn_cells.py::test_gradients_match_reference[gru-ln_simple]",
    "test_rnn_cells.py::test_initial_values_follow_options",
    "test_rnn_cells.py::test_ln_lstm_invariant_to_scaling_recurrent_weights[ln-True]",
    "test_rnn_cells.py::test_ln_lstm_invariant_to_scaling_recurrent_weights[none-False]",
    "test_rnn_cells.py::test_recurrent_bn_updates_per_step_statistics",
    "test_rnn_cells.py::test_recurrent_bn_longer_test_sequence_reuses_last_step_statistics",
    "test_rnn_cells.py::test_bfloat16_inputs[lstm-ln]",
    "test_rnn_cells.py::test_bfloat16_inputs[gru-ln]",
    "test_rnn_cells.py::test_bfloat16_inputs[lstm-bn]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-none]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-ln]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-wn]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-rms]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-prms]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-dyt]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-scalenorm]",
    "test_rnn_dropout.py::test_no_dropout_in_evaluation_and_at_rate_zero[gru-ln_simple]",
    "test_rnn_dropout.py::test_every_layer_and_direction_draws_its_own_masks",
    "test_rnn_dropout.py::test_a_cell_stepped_by_hand_needs_its_masks",
    "test_rnn_fused.py::test_fused_equals_scan_in_values_and_gradients[True-ln_simple_cell]",
    "test_rnn_fused.py::test_fused_equals_scan_stacked_bidirectional_unrolled",
    "test_rnn_fused.py::test_only_the_lstm_without_recurrent_bn_is_fused",
    "test_rnn_fused.py::test_fused_layer_with_the_batch_sharded_over_devices",
    "test_rnn_fused_gru.py::test_fused_gru_equals_scan_stacked_bidirectional_unrolled[ln]",
    "test_rnn_fused_gru.py::test_fused_gru_equals_scan_stacked_bidirectional_unrolled[rms]",
    "test_rnn_fused_gru.py::test_the_gru_layer_runs_the_fused_recurrence",
    "test_rnn_fused_gru.py::test_fused_gru_with_the_batch_sharded_over_devices",
    # Measured on 2026-12-01 with the quick tier at 1,480 cases (352 s on two cores
    # loaded by two other jobs, load 6 to 8): the cases over 1.5 s there, each case
    # listed (a function whose every case was slow keeps its cheapest).
    "test_assembly.py::test_the_config_is_checked_once_per_train_command",  # 7.1 s
    "test_attentive_reader_init_shapes.py::test_square_rules_at_an_odd_size",  # 1.6 s
    "test_attentive_reader_options.py::test_an_unanswerable_question_counts_as_an_error",  # 1.6 s
    "test_attentive_reader_options.py::test_listed_candidates_restrict_the_prediction[entities]",  # 1.5 s
    "test_benchmark_suite.py::test_results_md_shows_what_the_committed_records_give",  # 7.9 s
    "test_draw.py::test_filterbank_matches_numpy",  # 3.4 s
    "test_flops.py::test_lnorm_flops_compares_normalizers_round_robin",  # 7.3 s
    "test_flops.py::test_the_count_equals_the_traced_matmuls[draw]",  # 2.7 s
    "test_forward_models.py::test_bln_cifar_lenet_forward[bln-conventional]",  # 2.1 s
    "test_forward_models.py::test_bln_imdb_sentiment_rnn_forward[ln]",  # 1.9 s
    "test_forward_models.py::test_draw_forward",  # 4.7 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[attentive_reader]",  # 50.6 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[bln_cifar]",  # 20.8 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[bln_imdb]",  # 18.4 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[draw]",  # 34.4 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[handwriting]",  # 26.3 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[order_embeddings]",  # 18.2 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[skip_thoughts]",  # 9.4 s
    "test_golden_losses.py::test_first_updates_of_the_headline_norm[transformer_lm]",  # 7.0 s
    "test_gpu_check.py::test_a_worker_times_the_train_call_lnorm_train_jits",  # 2.1 s
    "test_gpu_check.py::test_the_device_phase_measures_both_ceilings",  # 8.1 s
    "test_gpu_check.py::test_the_driver_records_a_failed_worker_and_what_the_limit_left",  # 2.5 s
    "test_invariance.py::test_prms_invariance_fails_by_eps_when_it_reads_one_unit",  # 3.8 s
    "test_losses.py::test_evaluation_mean_ignores_padding_to_a_device_multiple",  # 5.0 s
    "test_mdn.py::test_log_density_matches_float64_near_unit_correlation[0.5-0.3-0.999999]",  # 1.9 s
    "test_normalization.py::test_fused_rms_norm_matches_autodiff",  # 2.3 s
    "test_normalization.py::test_layer_norm_matches_reference_eps_1e5_biased_variance",  # 1.9 s
    "test_optional_imports.py::test_lnorm_train_runs_without_them_and_says_what_to_install_when_asked",  # 13.5 s
    "test_order_embeddings.py::test_contrastive_loss_matches_numpy",  # 1.7 s
    "test_reader_ln_dynamics.py::test_growth_of_a_linear_recurrence_is_its_rate_per_step",  # 1.6 s
    "test_reader_ln_dynamics.py::test_lstm_saturation_against_the_reference_gates",  # 12.8 s
    "test_retrieval.py::test_without_ties_ranks_equal_the_authors_argsort",  # 1.6 s
    "test_rnn_cells.py::test_parameter_count[gru-ln_simple]",  # 2.1 s
    "test_rnn_cells.py::test_parameter_count[gru-prms]",  # 12.4 s
    "test_rnn_cells.py::test_parameter_count[gru-wn]",  # 3.1 s
    "test_rnn_cells.py::test_parameter_count[lstm-dyt_cell]",  # 1.6 s
    "test_rnn_cells.py::test_parameter_count[lstm-rms_cell]",  # 7.9 s
    "test_rnn_cudnn.py::test_lengths_of_zero_keep_the_initial_state",  # 2.3 s
    "test_rnn_cudnn.py::test_pack_weights_puts_each_gate_where_cudnn_reads_it",  # 4.7 s
    "test_rnn_cudnn.py::test_the_cudnn_path_gives_lnorm_lstm_values_and_gradients[padded]",  # 23.7 s
    "test_rnn_cudnn.py::test_the_cudnn_path_gives_lnorm_lstm_values_and_gradients[reverse]",  # 4.2 s
    "test_rnn_cudnn.py::test_the_cudnn_path_gives_lnorm_lstm_values_and_gradients[unpadded]",  # 1.9 s
    "test_rnn_cudnn.py::test_the_cudnn_path_gives_lnorm_lstm_values_and_gradients[weight-normalized]",  # 8.5 s
    "test_rnn_cudnn.py::test_the_layer_runs_cudnn_only_where_auto_chooses_it",  # 7.3 s
    "test_rnn_gpu.py::test_the_kernels_lower_for_cuda_and_run_interpreted_on_a_cpu",  # 3.7 s
    "test_rnn_gpu.py::test_the_layer_runs_the_kernels_exactly_where_auto_chooses_them",  # 1.8 s
    "test_rnn_gpu.py::test_the_tile_normalizers_equal_the_normalizers_with_padded_tiles[dyt]",  # 4.0 s
    "test_rnn_gpu.py::test_the_tile_normalizers_equal_the_normalizers_with_padded_tiles[ln]",  # 3.6 s
    "test_seed_bands.py::test_benchmark_figures_draw_each_experiment_with_records",  # 3.2 s
    "test_seed_bands.py::test_the_same_records_draw_the_same_bytes",  # 1.8 s
    "test_stop_signals.py::test_a_signal_inside_a_garbage_collection_callback_is_raised_after_it",  # 1.8 s
    "test_successor_norms.py::test_ln_simple_mask_and_eps",  # 1.6 s
    "test_successor_norms.py::test_scalar_gains_get_their_analytic_gradients",  # 1.6 s
    "test_successor_norms.py::test_step_modules_match_the_feed_forward_ones",  # 1.6 s
    "test_transformer_lm.py::test_attention_is_the_equation",  # 3.1 s
    "test_transformer_lm.py::test_dyt_starts_higher_before_attention_than_elsewhere",  # 3.4 s
    "test_transformer_lm.py::test_the_padding_rows_of_an_evaluation_batch_change_nothing[ln]",  # 2.7 s
    "test_transformer_lm_cli.py::test_flops_and_check_commands",  # 7.4 s
    "test_trivial_baselines.py::test_the_gaussian_is_the_one_lnorm_mixture_density_gives_correlated_offsets",  # 2.2 s
    "test_trivial_record.py::test_the_trivial_record_is_written_read_and_outside_the_run_identity",  # 6.1 s
})


def case_id(nodeid: str) -> str:
  """``tests/test_a.py::test_b[case]`` -> ``test_a.py::test_b[case]``."""
  return nodeid.split("::", 1)[0].rsplit("/", 1)[-1] + "::" + nodeid.split("::", 1)[1]


def function_id(nodeid: str) -> str:
  """``tests/test_a.py::test_b[case]`` -> ``test_a.py::test_b``."""
  return case_id(nodeid).split("[", 1)[0]


def is_quick(item) -> bool:
  if item.get_closest_marker("quick"):
    return True
  if item.get_closest_marker("slow") or item.get_closest_marker("real_data"):
    return False
  return function_id(item.nodeid) not in SLOW and case_id(item.nodeid) not in SLOW
